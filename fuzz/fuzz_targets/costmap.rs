#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gasworks_fuzz::costmap(data));
