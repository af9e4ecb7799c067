//! Links the binary with packed relative relocations (DT_RELR): the position-independent
//! executable keeps its address randomization, and the dynamic loader's table of where to
//! add the load address shrinks from 24 bytes a pointer to a bitmap (about 0.5 MB less in
//! the release binary; docs/BENCHMARKS.md, "Binary size"). Needs GNU ld 2.38 or lld 15,
//! and glibc 2.36 where the binary runs (the binary then names GLIBC_ABI_DT_RELR, so an
//! older glibc refuses it at start instead of misloading it).
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu")
    {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
