#!/usr/bin/env python3
"""The Python side of scripts/peer-bench.sh (run it through that script, which sets up the
venv and the LLVM library): gasworks' CPU backend against Mitsuba 3 (scalar_rgb, llvm_ad_rgb)
and Embree's own traversal, on the same scenes, in one run, the renderers taking turns.

For each scene it
- writes a plain-colour copy of the OBJ + MTL (textures, bump maps, masks stripped; every
  material Lambert `Kd` plus `Ke`), which gasworks renders, and the same triangles split by
  group and material into one small OBJ each, which Mitsuba loads;
- asks gasworks for the scene's camera once (`render -v` prints it) and passes it explicitly
  to gasworks and to Mitsuba;
- per thread count and round: gasworks (`render --backend cpu`), Mitsuba scalar_rgb,
  Mitsuba llvm_ad_rgb (each Mitsuba variant in a worker process of its own that loads the
  scene once), then Embree closest-hit queries on a fixed batch of rays;
- prints each round, then the agreement of the mean radiances and a table of min / median /
  max samples per second and gasworks / peer of the medians; rays per second for Embree and
  for gasworks' renders (closest-hit and shadow rays, shading included: its "time:" line).

Timings: gasworks' own "time:" line (render only: loading and the BVH build excluded);
mi.render() with the image's evaluation (llvm: dr.eval + dr.sync_thread, after one warm-up
render per scene and thread count so that the JIT compilation is excluded; the seed is an
opaque variable, so later renders reuse the kernels); Embree: the two run() calls, rays per second.
"""

import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

PRESETS = {
    # name: (width, height, spp): the settings
    "cornell": (512, 512, 64),
    "sponza-like": (640, 360, 16),
}
OTHER_OBJ = (512, 512, 16)
BLOCK = 16  # pixels per side of the blocks of the noise estimate
REGIONS = 4  # the image is also compared in REGIONS x REGIONS parts (orientation, framing)
MAX_RADIANCE = 1e6  # gasworks clamps Ke to crate::scene::MAX_RADIANCE; only warned about here
WORKER_TAG = "@@peer-bench "


def say(*a):
    print(*a, flush=True)


def warn(msg):
    say(f"warning: {msg}")


# ------------------------------------------------------------------------------------------
# MTL and OBJ


def parse_mtl(path, warnings):
    """The materials of one MTL file: name -> dict of the statements that matter here."""
    mats = {}
    cur = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            key, _, rest = line.partition(" ")
            rest = rest.strip()
            if key == "newmtl":
                cur = {"name": rest, "stmts": {}}
                if rest:
                    mats[rest] = cur
                continue
            if cur is None:
                continue
            cur["stmts"][key] = rest
    return mats


def floats(text, n):
    v = [float(w) for w in text.split()[:n]]
    return v + [v[-1]] * (n - len(v)) if v else [0.0] * n


def lambert_of(m, warnings):
    """(Kd, Ke) of a material as rendered here, with a warning for whatever gasworks would
    have rendered differently from the original MTL (see src/scene/obj/mtl.rs: convert)."""
    s = m["stmts"]
    name = m["name"]
    notes = []
    kd = floats(s["Kd"], 3) if "Kd" in s else [0.8, 0.8, 0.8]
    if any(c < 0 or c > 1 for c in kd):
        notes.append(f"Kd {s.get('Kd')} clamped to [0, 1] (as gasworks does)")
        kd = [min(max(c, 0.0), 1.0) for c in kd]
    ke = floats(s["Ke"], 3) if "Ke" in s else [0.0, 0.0, 0.0]
    if any(c < 0 for c in ke) or any(c > MAX_RADIANCE for c in ke):
        notes.append(f"Ke {s.get('Ke')} clamped to [0, {MAX_RADIANCE:g}] (as gasworks does)")
        ke = [min(max(c, 0.0), MAX_RADIANCE) for c in ke]
    ks = floats(s["Ks"], 3) if "Ks" in s else [0.0, 0.0, 0.0]
    ns = float(s["Ns"].split()[0]) if "Ns" in s else 0.0
    illum = int(float(s["illum"].split()[0])) if "illum" in s else None
    ni = float(s["Ni"].split()[0]) if "Ni" in s else None
    if "d" in s:
        dissolve = float(s["d"].split()[-1])
    elif "Tr" in s:
        dissolve = 1.0 - float(s["Tr"].split()[0])
    else:
        dissolve = 1.0
    glass = illum in (4, 6, 7, 9) or (dissolve < 1 and ni is not None and ni > 1)
    if glass:
        notes.append("glass in gasworks (illum/Ni/d): Lambert Kd in both renderers here")
    elif illum in (3, 5):
        notes.append(f"mirror in gasworks (illum {illum}): Lambert Kd in both renderers here")
    elif illum in (None, 2) and max(ks) > 0 and ns > 0:
        notes.append(
            f"glossy in gasworks (Ks {s['Ks']}, Ns {s['Ns']}): Lambert Kd in both renderers here"
        )
    if not glass and dissolve < 1:
        notes.append(f"see-through in gasworks (dissolve {dissolve:g}): opaque in both here")
    maps = [k for k in s if k.startswith("map_") or k in ("bump", "norm", "disp", "decal")]
    if maps:
        notes.append(f"{', '.join(sorted(maps))} stripped in both renderers (plain colours)")
    if notes:
        warnings.append(f"material {name}: " + "; ".join(notes))
    return kd, ke


class ObjScene:
    """The triangles of an OBJ file by (group, material), in file order."""

    def __init__(self, path):
        self.path = path
        self.mtllibs = []
        self.chunks = []  # dicts: group, material, pos (n,3,3), nrm (n,3,3) or None
        self.concave = 0
        self.degenerate = 0
        self._read()

    def _read(self):
        vs, vns = [], []
        # Faces as lists of (v, vn) index triples, per chunk key.
        order, faces = [], {}
        group, material = "default", None
        polys = 0
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for raw in f:
                if not raw or raw[0] == "#":
                    continue
                w = raw.split()
                if not w:
                    continue
                k = w[0]
                if k == "v":
                    vs.append((float(w[1]), float(w[2]), float(w[3])))
                elif k == "vn":
                    vns.append((float(w[1]), float(w[2]), float(w[3])))
                elif k == "f":
                    corners = []
                    for t in w[1:]:
                        p = t.split("/")
                        vi = int(p[0])
                        vi = vi - 1 if vi > 0 else len(vs) + vi
                        ni = -1
                        if len(p) > 2 and p[2]:
                            ni = int(p[2])
                            ni = ni - 1 if ni > 0 else len(vns) + ni
                        corners.append((vi, ni))
                    if len(corners) < 3:
                        continue
                    if len(corners) > 3:
                        polys += 1
                    key = (group, material)
                    if key not in faces:
                        faces[key] = []
                        order.append(key)
                    lst = faces[key]
                    for i in range(1, len(corners) - 1):  # a fan, as gasworks' parser does
                        lst.append((corners[0], corners[i], corners[i + 1]))
                    if len(corners) > 3 and self._is_concave([vs[c[0]] for c in corners]):
                        self.concave += 1
                elif k in ("g", "o"):
                    group = " ".join(w[1:]) or "default"
                elif k == "usemtl":
                    material = raw.strip()[len("usemtl"):].strip() or None
                elif k == "mtllib":
                    self.mtllibs.extend(w[1:])
        V = np.asarray(vs, dtype=np.float64).reshape(-1, 3)
        N = np.asarray(vns, dtype=np.float64).reshape(-1, 3)
        for key in order:
            idx = np.asarray(faces[key], dtype=np.int64)  # (n, 3, 2)
            pos = V[idx[:, :, 0]]
            area2 = np.linalg.norm(np.cross(pos[:, 1] - pos[:, 0], pos[:, 2] - pos[:, 0]), axis=1)
            keep = area2 > 0
            self.degenerate += int((~keep).sum())
            idx, pos = idx[keep], pos[keep]
            nrm = None
            if len(N) and (idx[:, :, 1] >= 0).all() and (idx[:, :, 1] < len(N)).all():
                nrm = N[idx[:, :, 1]]
            self.chunks.append({"group": key[0], "material": key[1], "pos": pos, "nrm": nrm})
        self.polygons = polys

    @staticmethod
    def _is_concave(pts):
        p = np.asarray(pts, dtype=np.float64)
        n = np.zeros(3)
        for i in range(len(p)):  # Newell's normal
            a, b = p[i], p[(i + 1) % len(p)]
            n += np.cross(a, b)
        signs = set()
        for i in range(len(p)):
            c = np.cross(p[(i + 1) % len(p)] - p[i], p[(i + 2) % len(p)] - p[(i + 1) % len(p)])
            d = float(np.dot(c, n))
            if abs(d) > 1e-12 * (np.linalg.norm(c) * np.linalg.norm(n) + 1e-300):
                signs.add(d > 0)
        return len(signs) > 1


def normals_for_mitsuba(chunk):
    """'flat' when the chunk has no vertex normals or only ones equal to its faces' (up to
    sign: gasworks and Mitsuba then shade with the geometric normal either way), 'invalid'
    when some are not finite or zero, else 'smooth'."""
    nrm = chunk["nrm"]
    if nrm is None:
        return "flat"
    length = np.linalg.norm(nrm, axis=2)
    if not np.isfinite(nrm).all() or (length <= 0).any():
        return "invalid"
    pos = chunk["pos"]
    g = np.cross(pos[:, 1] - pos[:, 0], pos[:, 2] - pos[:, 0])
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    cos = np.einsum("fk,fck->fc", g, nrm / length[..., None])
    return "flat" if (np.abs(cos) > 1 - 1e-4).all() else "smooth"


def write_chunk_obj(path, chunk, with_normals):
    pos = chunk["pos"].reshape(-1, 3)
    n = len(pos)
    lines = ["v %.9g %.9g %.9g" % tuple(p) for p in pos]
    if with_normals:
        lines += ["vn %.9g %.9g %.9g" % tuple(v) for v in chunk["nrm"].reshape(-1, 3)]
        lines += [f"f {i}//{i} {i + 1}//{i + 1} {i + 2}//{i + 2}" for i in range(1, n + 1, 3)]
    else:
        lines += [f"f {i} {i + 1} {i + 2}" for i in range(1, n + 1, 3)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def prepare_scene(spec, a, index):
    """Resolves SCENE[:WxH[:SPP]], writes its plain-colour copy and Mitsuba's per-group OBJs,
    finds its camera; returns a dict describing it."""
    parts = spec.split(":")
    name = parts[0]
    if name in PRESETS:
        w, h, spp = PRESETS[name]
    else:
        w, h, spp = OTHER_OBJ
    if len(parts) > 1 and parts[1]:
        m = re.fullmatch(r"(\d+)x(\d+)", parts[1])
        if not m:
            sys.exit(f"peer-bench: {spec}: expected NAME[:WxH[:SPP]]")
        w, h = int(m.group(1)), int(m.group(2))
    if len(parts) > 2 and parts[2]:
        spp = int(parts[2])
    if a.spp:
        spp = a.spp
    sdir = os.path.join(a.work, f"scene{index}")
    os.makedirs(sdir)
    if name == "cornell":
        src = os.path.join(a.repo, "assets", "cornell", "cornell.obj")
    elif name == "sponza-like":
        gen = os.path.join(sdir, "gen")
        run([a.bin, "gen", "sponza-like", "-o", gen, "-q"])
        src = os.path.join(gen, "sponza_like.obj")
    else:
        src = os.path.abspath(name)
        name = os.path.splitext(os.path.basename(name))[0]
    say(f"\n== {name}: {w}x{h}, {spp} spp, max depth {a.max_depth} ({src})")
    obj = ObjScene(src)
    warnings = []
    mats = {}
    for lib in obj.mtllibs:
        p = os.path.join(os.path.dirname(src), lib)
        if os.path.exists(p):
            for k, m in parse_mtl(p, warnings).items():
                mats.setdefault(k, m)
        else:
            warnings.append(f"mtllib {lib} not found: its materials are gasworks' default")
    used = []
    for c in obj.chunks:
        if c["material"] not in used:
            used.append(c["material"])
    lambert = {}
    for m in used:
        if m in mats:
            lambert[m] = lambert_of(mats[m], warnings)
        else:
            if m is not None:
                warnings.append(f"usemtl {m}: no such material; gasworks' default (Kd 0.8)")
            lambert[m] = ([0.8, 0.8, 0.8], [0.0, 0.0, 0.0])
    # The plain copy for gasworks: the same OBJ (without vertex normals under --normals flat),
    # its mtllib pointing at plain.mtl, which holds every material used as Lambert Kd (+ Ke);
    # one no library defines is written with Kd 0.8, gasworks' default material, so either way.
    plain_mtl = os.path.join(sdir, "plain.mtl")
    with open(plain_mtl, "w") as f:
        f.write("# written by scripts/peer_bench.py: plain colours, Lambert Kd + Ke\n")
        for m, (kd, ke) in lambert.items():
            if m is None:
                continue
            f.write(f"\nnewmtl {m}\nKd {kd[0]:.9g} {kd[1]:.9g} {kd[2]:.9g}\n")
            if max(ke) > 0:
                f.write(f"Ke {ke[0]:.9g} {ke[1]:.9g} {ke[2]:.9g}\n")
            f.write("illum 1\n")
    plain_obj = os.path.join(sdir, "plain.obj")
    with open(src, encoding="utf-8", errors="replace") as fi, open(plain_obj, "w") as fo:
        for line in fi:
            if line.startswith("mtllib"):
                line = "mtllib plain.mtl\n"
            elif a.normals == "flat" and line.startswith("vn"):
                continue
            elif a.normals == "flat" and line.startswith("f ") and "/" in line:
                # v/vt/vn -> v/vt, v//vn -> v
                line = "f " + " ".join(
                    "/".join(t.split("/")[:2]).rstrip("/") for t in line.split()[1:]
                ) + "\n"
            fo.write(line)
    # Mitsuba's shapes: one OBJ per (group, material).
    mdir = os.path.join(sdir, "mitsuba")
    os.makedirs(mdir)
    shapes = []
    smooth = invalid = 0
    tris = []
    emitters = 0
    for i, c in enumerate(obj.chunks):
        if not len(c["pos"]):
            continue
        kind = normals_for_mitsuba(c)
        smooth += kind == "smooth"
        invalid += kind == "invalid"
        kd, ke = lambert[c["material"]]
        # An emitter's side is its winding's in gasworks: its normals are never kept.
        keep = a.normals == "keep" and kind == "smooth" and max(ke) <= 0
        p = os.path.join(mdir, f"shape{i:05d}.obj")
        write_chunk_obj(p, c, keep)
        shapes.append({"file": p, "kd": kd, "ke": ke, "smooth": keep})
        emitters += max(ke) > 0
        tris.append(c["pos"])
    tris = np.concatenate(tris).astype(np.float32)
    if smooth and a.normals == "flat":
        warnings.append(
            f"{smooth} groups have smooth vertex normals: dropped for both renderers "
            "(--normals flat), both shade with the geometric normal"
        )
    elif smooth:
        warnings.append(
            f"{smooth} groups have smooth vertex normals: kept for both (--normals keep), but "
            "gasworks drops directions below the geometric surface and Mitsuba does not"
        )
    if invalid:
        warnings.append(f"{invalid} groups have invalid vertex normals: flat in Mitsuba")
    if obj.concave:
        warnings.append(
            f"{obj.concave} concave polygons: fans here, ear-clipped by gasworks (geometry differs)"
        )
    if emitters == 0:
        warnings.append("no emitter (Ke): gasworks would light it with its default sky; not matched")
    for wmsg in warnings:
        warn(f"{name}: {wmsg}")
    say(
        f"{len(tris)} triangles ({obj.degenerate} degenerate dropped, {obj.polygons} polygons "
        f"fanned) in {len(shapes)} Mitsuba shapes, {emitters} of them area emitters"
    )
    cam = probe_camera(a, plain_obj, w, h, sdir)
    say(
        f"camera: --eye {fmt3(cam['eye'])} --look-at {fmt3(cam['look_at'])} "
        f"--up {fmt3(cam['up'])} --fov {cam['fov']:g} (vertical; {cam['source']})"
    )
    lo, hi = tris.reshape(-1, 3).min(axis=0), tris.reshape(-1, 3).max(axis=0)
    return {
        "name": name,
        "dir": sdir,
        "obj": plain_obj,
        "width": w,
        "height": h,
        "spp": spp,
        "camera": cam,
        "shapes": shapes,
        "triangles": tris,
        "bounds": (lo.tolist(), hi.tolist()),
    }


def fmt3(v):
    return ",".join(f"{x:g}" for x in v)


# ------------------------------------------------------------------------------------------
# gasworks


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        sys.exit(f"peer-bench: {' '.join(cmd)} failed ({r.returncode})")
    return r.stdout + r.stderr


def probe_camera(a, obj, w, h, sdir):
    """The camera gasworks uses by default at this size (its scene hint, else its framing)."""
    out = run([a.bin, "render", obj, "-o", os.path.join(sdir, "probe.exr"), "--width", str(w),
               "--height", str(h), "--spp", "1", "--max-depth", "1", "--backend", "cpu",
               "--progress", "none", "-v"])
    for line in out.splitlines():
        if line.startswith("warning") or "warning:" in line:
            warn(f"gasworks: {line}")
    m = re.search(
        r"^camera: --eye (\S+) --look-at (\S+) --up (\S+) --fov (\S+)(.*)$", out, re.M
    )
    if not m:
        sys.exit("peer-bench: gasworks printed no camera line:\n" + out)
    if "--lens-radius" in m.group(5):
        sys.exit("peer-bench: the scene's camera has a lens; only pinholes are compared")
    vec = lambda s: [float(x) for x in s.split(",")]  # noqa: E731
    src = re.search(r"\((.*)\)", m.group(5))
    return {"eye": vec(m.group(1)), "look_at": vec(m.group(2)), "up": vec(m.group(3)),
            "fov": float(m.group(4)), "source": src.group(1) if src else "default"}


def gasworks_trace(a, sc, threads, rays):
    """Rays per second of gasworks' closest-hit traversal alone on Embree's rays."""
    text = run([a.trace_bin, sc["obj"], rays, str(threads)])
    m = re.search(r"^traced ([0-9]+) rays, ([0-9]+) hits, ([0-9.]+) s, ([0-9.]+) Mrays/s", text,
                  re.M)
    if not m:
        sys.exit("peer-bench: no 'traced' line in trace_rays' output:\n" + text)
    return int(m.group(2)) / int(m.group(1)), float(m.group(4)) * 1e6


def gasworks_render(a, sc, threads, seed, out):
    cam = sc["camera"]
    cmd = [a.bin, "render", sc["obj"], "-o", out, "--backend", "cpu", "--threads", str(threads),
           "--width", str(sc["width"]), "--height", str(sc["height"]), "--spp", str(sc["spp"]),
           "--max-depth", str(a.max_depth), "--seed", str(seed), "--filter", "box",
           "--eye", fmt3(cam["eye"]), "--look-at", fmt3(cam["look_at"]), "--up", fmt3(cam["up"]),
           "--fov", repr(cam["fov"]), "--progress", "none", "-v"]
    text = run(cmd)
    # "time: load 0.02 s, build 0.011 s, render 1.52 s, 2.760 M samples/s"
    m = re.search(r"^time: .*render ([0-9.]+) s, ([0-9.]+) M samples/s, ([0-9.]+) M rays/s",
                  text, re.M)
    if not m:
        sys.exit("peer-bench: no time line in gasworks' output:\n" + text)
    rate, rays = float(m.group(2)) * 1e6, float(m.group(3)) * 1e6
    samples = sc["width"] * sc["height"] * sc["spp"]
    return samples / rate, rate, rays


# ------------------------------------------------------------------------------------------
# Mitsuba (one worker process per variant)


def mitsuba_worker(variant, scene_json):
    import drjit as dr
    import mitsuba as mi

    mi.set_variant(variant)
    mi.set_log_level(mi.LogLevel.Warn)
    with open(scene_json) as f:
        sc = json.load(f)
    cam = sc["camera"]
    lo, hi = np.array(sc["bounds"][0]), np.array(sc["bounds"][1])
    eye = np.array(cam["eye"])
    reach = float(np.linalg.norm(hi - lo) + np.linalg.norm(eye - (lo + hi) / 2))
    d = {
        "type": "scene",
        "integrator": {
            "type": "path",
            "max_depth": sc["max_depth"],
            "rr_depth": 3,
            "hide_emitters": False,
        },
        "sensor": {
            "type": "perspective",
            "fov_axis": "y",
            "fov": cam["fov"],
            "near_clip": reach * 1e-5,
            "far_clip": reach * 10,
            "to_world": mi.ScalarTransform4f().look_at(
                origin=cam["eye"], target=cam["look_at"], up=cam["up"]
            ),
            "film": {
                "type": "hdrfilm",
                "width": sc["width"],
                "height": sc["height"],
                "rfilter": {"type": "box"},
                "pixel_format": "rgb",
                "sample_border": False,
            },
            "sampler": {"type": "independent", "sample_count": sc["spp"]},
        },
    }
    for i, s in enumerate(sc["shapes"]):
        shape = {
            "type": "obj",
            "filename": s["file"],
            "face_normals": not s["smooth"],
            "bsdf": {
                "type": "twosided",
                "material": {"type": "diffuse", "reflectance": {"type": "rgb", "value": s["kd"]}},
            },
        }
        if max(s["ke"]) > 0:
            shape["emitter"] = {"type": "area", "radiance": {"type": "rgb", "value": s["ke"]}}
        d[f"shape{i:05d}"] = shape
    t0 = time.perf_counter()
    scene = mi.load_dict(d)
    reply({"loaded": time.perf_counter() - t0})
    jit = variant.startswith("llvm")
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "quit":
            break
        dr.set_thread_count(cmd["threads"])
        t0 = time.perf_counter()
        img = mi.render(scene, spp=sc["spp"], seed=cmd["seed"])
        if jit:
            dr.eval(img)
            dr.sync_thread()
        seconds = time.perf_counter() - t0
        if cmd.get("out"):
            np.save(cmd["out"], np.array(img, dtype=np.float32)[..., :3])
        reply({"seconds": seconds, "threads": dr.thread_count()})


def reply(obj):
    sys.stdout.write(WORKER_TAG + json.dumps(obj) + "\n")
    sys.stdout.flush()


class Worker:
    def __init__(self, variant, scene_json):
        self.variant = variant
        # Dr.Jit keeps its kernel cache in $HOME/.drjit: in the work folder here, so that the
        # run writes nothing outside it and every run compiles its kernels afresh.
        home = os.path.join(os.path.dirname(scene_json), "home")
        os.makedirs(home, exist_ok=True)
        self.p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", variant, scene_json],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, HOME=home),
        )
        self.loaded = self._read()["loaded"]

    def _read(self):
        for line in self.p.stdout:
            if line.startswith(WORKER_TAG):
                return json.loads(line[len(WORKER_TAG):])
            sys.stderr.write(f"[{self.variant}] {line}")
        sys.exit(f"peer-bench: the {self.variant} worker ended (exit {self.p.wait()})")

    def render(self, threads, seed, out):
        self.p.stdin.write(json.dumps({"cmd": "render", "threads": threads, "seed": seed,
                                       "out": out}) + "\n")
        self.p.stdin.flush()
        r = self._read()
        if r["threads"] != threads:
            warn(f"{self.variant}: asked for {threads} threads, Dr.Jit reports {r['threads']}")
        return r["seconds"]

    def close(self):
        try:
            self.p.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        self.p.wait()


# ------------------------------------------------------------------------------------------
# Embree


class EmbreeRays:
    """Closest-hit queries (rtcIntersect1 per ray, through embreex's run(..., 'DISTANCE')) on
    the scene's triangles in one mesh: one primary ray per pixel of the same camera (jittered),
    then cosine-weighted rays from the primary hits, about `total` rays in all."""

    def __init__(self, sc, total, seed=1):
        from embreex import mesh_construction, rtcore_scene

        tris = sc["triangles"]
        self.scene = rtcore_scene.EmbreeScene()
        mesh_construction.TriangleMesh(self.scene, tris)
        w, h = sc["width"], sc["height"]
        cam = sc["camera"]
        rng = np.random.default_rng(seed)
        eye = np.array(cam["eye"], dtype=np.float64)
        fwd = np.array(cam["look_at"]) - eye
        fwd /= np.linalg.norm(fwd)
        right = np.cross(fwd, cam["up"])
        right /= np.linalg.norm(right)
        up = np.cross(right, fwd)
        t = math.tan(math.radians(cam["fov"]) / 2)
        ys, xs = np.mgrid[0:h, 0:w]
        px = (xs.ravel() + rng.random(w * h)) / w * 2 - 1
        py = 1 - (ys.ravel() + rng.random(w * h)) / h * 2
        d = fwd + px[:, None] * right * t * w / h + py[:, None] * up * t
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        po = np.repeat(eye[None].astype(np.float32), len(d), axis=0)
        pd = d.astype(np.float32)
        t0 = time.perf_counter()
        self.scene.run(po[:1], pd[:1], query="DISTANCE")  # commits: Embree's BVH build
        self.build_s = time.perf_counter() - t0
        hit = self.scene.run(po, pd, output=1)
        ok = hit["primID"] >= 0
        self.primary_hits = float(ok.mean())
        n = hit["Ng"][ok].astype(np.float64)
        n /= np.linalg.norm(n, axis=1, keepdims=True)
        n *= -np.sign(np.einsum("ij,ij->i", n, d[ok]))[:, None]  # towards the camera side
        diag = float(np.linalg.norm(tris.reshape(-1, 3).max(0) - tris.reshape(-1, 3).min(0)))
        p = eye + d[ok] * hit["tfar"][ok][:, None] + n * 1e-5 * diag
        # k passes over the hits in pixel order, as a wavefront's next bounce would go.
        k = max(1, (total - len(pd)) // max(1, ok.sum()))
        p = np.tile(p, (k, 1))
        n = np.tile(n, (k, 1))
        # Cosine-weighted directions about n.
        u1, u2 = rng.random(len(n)), rng.random(len(n))
        r, phi = np.sqrt(u1), 2 * np.pi * u2
        a = np.where(np.abs(n[:, :1]) > 0.9, [[0.0, 1.0, 0.0]], [[1.0, 0.0, 0.0]])
        tx = np.cross(n, a)
        tx /= np.linalg.norm(tx, axis=1, keepdims=True)
        ty = np.cross(n, tx)
        sd = (tx * (r * np.cos(phi))[:, None] + ty * (r * np.sin(phi))[:, None]
              + n * np.sqrt(np.maximum(0, 1 - u1))[:, None])
        self.batches = [(po, pd), (p.astype(np.float32), sd.astype(np.float32))]
        self.rays = len(pd) + len(sd)
        bounce_hits = self.scene.run(*self.batches[1], output=1)["primID"] >= 0
        self.hits = (int(ok.sum()) + int(bounce_hits.sum())) / self.rays

    def write(self, path):
        """The rays for gasworks' traversal alone (examples/trace_rays.rs): little-endian f32,
        origin then direction, in the order Embree traces them."""
        rays = np.concatenate([np.hstack([o, d]) for o, d in self.batches])
        rays.astype("<f4").tofile(path)

    def trace(self, threads):
        """Seconds for all the rays on `threads` threads (embreex releases the GIL)."""
        jobs = []
        for o, d in self.batches:
            for c in np.array_split(np.arange(len(o)), threads):
                jobs.append((np.ascontiguousarray(o[c]), np.ascontiguousarray(d[c])))
        t0 = time.perf_counter()
        if threads == 1:
            for o, d in jobs:
                self.scene.run(o, d, query="DISTANCE")
        else:
            with concurrent.futures.ThreadPoolExecutor(threads) as ex:
                list(ex.map(lambda j: self.scene.run(j[0], j[1], query="DISTANCE"), jobs))
        return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------
# Image agreement


def block_means(img):
    """Per-block (BLOCK x BLOCK pixels) mean of each channel, (by, bx, 3); the image is cropped
    to whole blocks (for the noise estimate only)."""
    v = img[..., :3]
    h, w = (v.shape[0] // BLOCK) * BLOCK, (v.shape[1] // BLOCK) * BLOCK
    return v[:h, :w].reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK, 3).mean(axis=(1, 3))


def estimate(images):
    """Mean radiance (all pixels, RGB mean) of the average of independent renders; its
    standard error by the block estimate (the spread of each 16x16 block's mean over the
    renders; blocks taken as independent of each other); and each region's mean and variance
    per channel (REGIONS x REGIONS x 3, fewer where a region would hold under 16 blocks), or
    None (nan) with fewer than two renders."""
    n = len(images)
    mean = float(np.mean([im[..., :3].mean() for im in images]))
    b = np.stack([block_means(im) for im in images])  # (n, by, bx, 3)
    if n < 2 or b.shape[1] == 0 or b.shape[2] == 0:
        return mean, float("nan"), None
    var = b.mean(axis=3).var(axis=0, ddof=1) / n  # each block's RGB mean, n-render average
    se = float(math.sqrt(var.sum()) / var.size)
    var_c = b.var(axis=0, ddof=1) / n
    avg = b.mean(axis=0)
    by, bx = var.shape
    # Regions of at least 16 blocks each, so that their variances are estimated well enough.
    r = next((r for r in range(REGIONS, 1, -1) if (by // r) * (bx // r) >= 16), 0)
    if not r:
        return mean, se, None
    rm, rv = np.zeros((r, r, 3)), np.zeros((r, r, 3))
    for i in range(r):
        for j in range(r):
            sl = (slice(i * by // r, (i + 1) * by // r), slice(j * bx // r, (j + 1) * bx // r))
            k = avg[sl].shape[0] * avg[sl].shape[1]
            rm[i, j] = avg[sl].mean(axis=(0, 1))
            rv[i, j] = var_c[sl].sum(axis=(0, 1)) / k**2
    return mean, se, (rm, rv)


# ------------------------------------------------------------------------------------------


def mmm(v):
    return min(v), statistics.median(v), max(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default=None, help="comma-separated thread counts")
    ap.add_argument("--spp", type=int, default=0, help="override every scene's spp")
    ap.add_argument("--max-depth", type=int, default=8)
    ap.add_argument("--embree-rays", type=int, default=4_000_000)
    ap.add_argument("--trace-bin", default=None,
                    help="examples/trace_rays: gasworks' traversal alone on Embree's rays")
    ap.add_argument("--no-llvm", action="store_true")
    ap.add_argument("--normals", choices=["flat", "keep"], default="flat",
                    help="flat: vertex normals dropped for both renderers (geometric normals); "
                    "keep: kept for both")
    ap.add_argument("scenes", nargs="*", default=["cornell", "sponza-like"])
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("peer-bench: --rounds must be at least 1")
    cores = os.cpu_count() or 1
    threads = [int(t) for t in (a.threads or f"1,{cores}").split(",")]
    threads = list(dict.fromkeys(threads))
    if a.rounds * len(threads) < 2:
        warn("one render per renderer: no noise estimate, so no z-scores")

    import drjit
    import embreex  # noqa: F401
    import mitsuba

    variants = ["scalar_rgb"] + ([] if a.no_llvm else ["llvm_ad_rgb"])
    say(f"gasworks: {a.bin} ({run([a.bin, '--version']).strip()})")
    say(f"mitsuba {mitsuba.__version__} ({', '.join(variants)}), drjit {drjit.__version__}"
        + (f", LLVM {os.environ.get('DRJIT_LIBLLVM_PATH')}" if not a.no_llvm else ""))
    say(f"threads {','.join(map(str, threads))}; {a.rounds} rounds; {cores} cores")

    rows = []  # (scene, threads, renderer, unit, values, gasworks' values)
    agree = []
    failed = False
    for si, spec in enumerate(a.scenes):
        sc = prepare_scene(spec, a, si)
        sj = os.path.join(sc["dir"], "scene.json")
        with open(sj, "w") as f:
            json.dump({k: sc[k] for k in ("width", "height", "spp", "camera", "shapes", "bounds")}
                      | {"max_depth": a.max_depth}, f)
        workers = []
        for v in variants:
            wk = Worker(v, sj)
            say(f"mitsuba {v}: scene loaded in {wk.loaded:.2f} s")
            workers.append(wk)
        emb = EmbreeRays(sc, a.embree_rays)
        say(f"embree: {emb.rays} rays ({len(emb.batches[0][0])} primary, "
            f"{100 * emb.primary_hits:.1f}% of them hit; the rest from their hits), "
            f"BVH built in {emb.build_s:.2f} s; {100 * emb.hits:.1f}% of all rays hit")
        rays_file = os.path.join(sc["dir"], "rays.f32")
        if a.trace_bin:
            emb.write(rays_file)
        samples = sc["width"] * sc["height"] * sc["spp"]
        names = ["gasworks"] + [f"mitsuba {v}" for v in variants] + ["embree"]
        images = {n: [] for n in names[:-1]}
        for ti, t in enumerate(threads):
            rates = {n: [] for n in names + ["gasworks rays", "gasworks trace"]}
            for wk in workers:
                # Dr.Jit compiles (or reloads) the kernel when the thread count changes.
                if wk.variant.startswith("llvm"):
                    s = wk.render(t, 999_999 - ti, None)
                    say(f"mitsuba {wk.variant}, {t} thread{'s' if t > 1 else ''}: warm-up render "
                        f"(JIT compilation) {s:.2f} s, not counted")
            for r in range(a.rounds):
                seed = 1 + r + 1000 * ti
                parts = []
                out = os.path.join(sc["dir"], f"gasworks-{t}-{r}.exr")
                s, rate, rays = gasworks_render(a, sc, t, seed, out)
                rates["gasworks"].append(rate)
                rates["gasworks rays"].append(rays)
                images["gasworks"].append(out)
                parts.append(f"gasworks {s:.2f} s")
                for wk in workers:
                    out = os.path.join(sc["dir"], f"{wk.variant}-{t}-{r}.npy")
                    s = wk.render(t, seed, out)
                    rates[f"mitsuba {wk.variant}"].append(samples / s)
                    images[f"mitsuba {wk.variant}"].append(out)
                    parts.append(f"{wk.variant} {s:.2f} s")
                s = emb.trace(t)
                rates["embree"].append(emb.rays / s)
                parts.append(f"embree {s:.2f} s")
                if a.trace_bin:
                    hits, rate = gasworks_trace(a, sc, t, rays_file)
                    rates["gasworks trace"].append(rate)
                    parts.append(f"gasworks trace {emb.rays / rate:.2f} s "
                                 f"({100 * hits:.1f}% hit)")
                say(f"{sc['name']}, {t} thread{'s' if t > 1 else ''}, round {r + 1}: "
                    + ", ".join(parts))
            traced = ["gasworks trace"] if a.trace_bin else []
            for n in names[:-1] + ["gasworks rays"] + traced + ["embree"]:
                rows.append((sc["name"], t, n, rates[n], rates["gasworks"]))
        for wk in workers:
            wk.close()
        # Agreement, over every render of each renderer (all thread counts: each its own seed).
        import mitsuba as mi

        mi.set_variant("scalar_rgb")
        loaded = {n: [np.array(mi.Bitmap(p)) if p.endswith(".exr") else np.load(p)
                      for p in ps] for n, ps in images.items()}
        g_mean, g_se, g_reg = estimate(loaded["gasworks"])
        for n in names[1:-1]:
            m_mean, m_se, m_reg = estimate(loaded[n])
            z = (g_mean - m_mean) / math.hypot(g_se, m_se)
            zr = float("nan")
            if g_reg and m_reg and g_reg[0].shape == m_reg[0].shape:
                zr = float(np.abs((g_reg[0] - m_reg[0]) / np.sqrt(g_reg[1] + m_reg[1])).max())
            agree.append((sc["name"], n, g_mean, g_se, m_mean, m_se, z, zr,
                          len(loaded["gasworks"]), len(loaded[n])))
            # Regions: up to 48 z-scores, each with a variance estimated from few renders, so a
            # wider margin (a mirrored or shifted image is off by hundreds).
            if abs(z) > 3 or zr > 5:
                failed = True
        shutil.rmtree(os.path.join(sc["dir"], "mitsuba"))

    say("\nimage agreement: mean radiance (all pixels, RGB mean) of each renderer's renders "
        "averaged (each render its own seed, all thread counts pooled); standard error by a "
        "block estimate (16x16-pixel blocks' spread over the renders); z of the difference; "
        f"and the largest |z| of the {REGIONS}x{REGIONS} regions' means, R, G and B apart "
        "(fewer regions in small images)")
    for sn, n, gm, gs, mm, ms, z, zr, gn, mn in agree:
        zs = "n/a" if math.isnan(z) else f"{z:+.2f}"
        zrs = "n/a" if math.isnan(zr) else f"{zr:.2f}"
        renders = f"{gn} render{'s' if gn != 1 else ''}"
        pm = lambda se: "" if math.isnan(se) else f" +- {se:.1e}"  # noqa: E731
        say(f"  {sn:<12} gasworks {gm:.6f}{pm(gs)} ({renders}), {n} {mm:.6f}{pm(ms)}"
            f" ({mn}): z {zs}, regions max |z| {zrs}")
    say("\nsamples per second (width x height x spp / seconds), embree: rays per second; "
        "min / median / max over the rounds")
    say(f"{'scene':<12} {'threads':>7}  {'renderer':<20} {'unit':<8} {'min':>8} {'median':>8}"
        f" {'max':>8}  {'gasworks / peer':>15}")
    embree = {(sn, t): statistics.median(v) for sn, t, n, v, _ in rows if n == "embree"}
    ray_rows = {"gasworks rays": "(1)", "gasworks trace": "(2)"}
    for sn, t, n, v, g in rows:
        lo, med, hi = mmm(v)
        unit = "Mrays/s" if n == "embree" or n in ray_rows else "Ms/s"
        ratio = ""
        if n in ray_rows:
            ratio = f"{med / embree[(sn, t)]:.2f}x {ray_rows[n]}"
        elif n not in ("gasworks", "embree"):
            ratio = f"{statistics.median(g) / med:.2f}x"
        say(f"{sn:<12} {t:>7}  {n:<20} {unit:<8} {lo / 1e6:>8.3f} {med / 1e6:>8.3f}"
            f" {hi / 1e6:>8.3f}  {ratio:>15}")
    say("(1) gasworks rays: the closest-hit and shadow rays of its renders per second of render,"
        " shading included, over embree's closest-hit queries alone")
    if a.trace_bin:
        say("(2) gasworks trace: gasworks' closest-hit queries alone on embree's rays "
            "(examples/trace_rays.rs), over embree's")
    if failed:
        say("\nAGREEMENT FAILED: |z| > 3 (or a region's > 5): the conventions do not match; "
            "the speeds above compare different images")
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        mitsuba_worker(sys.argv[2], sys.argv[3])
    else:
        main()
