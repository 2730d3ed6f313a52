//! The hash-seed adapter linked into the bridge component (build/hash_seed_adapter.rs).
//!
//! std seeds every `HashMap` in the guest through the adapter's `insecure-seed`. These
//! tests run the adapter module the build linked, against a fake main module and a fake
//! `rng` import: the seed std gets is exactly what `rng.random-bytes` answered (so it
//! varies with every draw, and a replay of the imports replays it), and a short answer
//! traps instead of seeding with predictable bytes. That the component imports no
//! `wasi:random` at all is tests/tests/e2e/capability_audit.rs.

use wasmtime::{Caller, Engine, Extern, Linker, Memory, MemoryType, Module, Store};

/// The adapter exactly as build.rs generated and linked it.
static ADAPTER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hash-seed-adapter.wasm"));

/// Where the fake guest puts std's 16-byte return area (8-aligned, like std's).
const RETURN_AREA: usize = 64;

/// The fake guest and host around one adapter instance.
struct Fake {
    memory: Option<Memory>,
    /// What `rng.random-bytes` answers.
    answer: Vec<u8>,
    /// Each length the adapter asked `rng.random-bytes` for.
    asked: Vec<u32>,
    /// The fake guest allocator's next free address.
    next_free: i32,
}

/// The `rng` interface the adapter imports `random-bytes` from.
fn rng_interface(module: &Module) -> String {
    module
        .imports()
        .find(|import| import.name() == "random-bytes")
        .map(|import| import.module().to_string())
        .expect("the adapter imports random-bytes")
}

/// Runs std's seed call once against `answer` and returns the two keys' bytes and the
/// lengths the adapter asked for.
fn seed_from(answer: &[u8]) -> wasmtime::Result<([u8; 16], Vec<u32>)> {
    let engine = Engine::default();
    let module = Module::new(&engine, ADAPTER)?;
    let mut store = Store::new(
        &engine,
        Fake {
            memory: None,
            answer: answer.to_vec(),
            asked: Vec::new(),
            next_free: 1024,
        },
    );
    let memory = Memory::new(&mut store, MemoryType::new(1, None))?;
    store.data_mut().memory = Some(memory);
    let mut linker = Linker::new(&engine);
    linker.define(&store, "env", "memory", memory)?;
    // The guest's own allocator; a bump allocator serves one request.
    linker.func_wrap(
        "__main_module__",
        "cabi_realloc",
        |mut caller: Caller<'_, Fake>, old: i32, old_len: i32, _align: i32, len: i32| {
            assert_eq!((old, old_len), (0, 0), "only fresh allocations");
            let address = caller.data().next_free;
            caller.data_mut().next_free += len;
            address
        },
    )?;
    // What the canonical ABI does for `random-bytes: func(len: u32) -> list<u8>` lowered
    // into the adapter: the list goes where the adapter's import realloc says, and its
    // (address, length) into the return area the adapter passed.
    linker.func_wrap(
        &rng_interface(&module),
        "random-bytes",
        |mut caller: Caller<'_, Fake>, len: i32, ret: i32| -> wasmtime::Result<()> {
            caller.data_mut().asked.push(len as u32);
            let answer = caller.data().answer.clone();
            let Some(Extern::Func(realloc)) = caller.get_export("cabi_import_realloc") else {
                wasmtime::bail!("the adapter exports no cabi_import_realloc");
            };
            let realloc = realloc.typed::<(i32, i32, i32, i32), i32>(&caller)?;
            let list = realloc.call(&mut caller, (0, 0, 1, answer.len() as i32))?;
            let memory = caller.data().memory.expect("memory is set");
            memory.write(&mut caller, list as usize, &answer)?;
            memory.write(&mut caller, ret as usize, &list.to_le_bytes())?;
            memory.write(
                &mut caller,
                ret as usize + 4,
                &(answer.len() as u32).to_le_bytes(),
            )?;
            Ok(())
        },
    )?;
    let instance = linker.instantiate(&mut store, &module)?;
    let insecure_seed = instance.get_typed_func::<i32, ()>(&mut store, "insecure-seed")?;
    insecure_seed.call(&mut store, RETURN_AREA as i32)?;
    let mut seed = [0u8; 16];
    memory.read(&store, RETURN_AREA, &mut seed)?;
    Ok((seed, store.into_data().asked))
}

#[test]
fn the_hashmap_seed_is_what_the_rng_import_answered() {
    let first: Vec<u8> = (1..=16).collect();
    let (seed, asked) = seed_from(&first).expect("the seed call succeeds");
    assert_eq!(seed.as_slice(), first.as_slice());
    assert_eq!(asked, [16], "one draw of 16 bytes: std's two u64 keys");

    // Another draw, another seed: in the real host every instance draws afresh from the
    // OS, so two sessions never share their maps' keys.
    let second: Vec<u8> = (101..=116).collect();
    let (other, _) = seed_from(&second).expect("the seed call succeeds");
    assert_eq!(other.as_slice(), second.as_slice());
    assert_ne!(seed, other);
}

#[test]
fn a_short_answer_traps_instead_of_seeding_with_predictable_bytes() {
    let short: Vec<u8> = (1..=15).collect();
    let refused = seed_from(&short).expect_err("15 bytes are not a seed");
    assert_eq!(
        refused.downcast_ref::<wasmtime::Trap>(),
        Some(&wasmtime::Trap::UnreachableCodeReached),
        "{refused:?}"
    );
}

#[test]
fn the_adapter_reaches_nothing_but_the_bridge_rng_import() {
    let engine = Engine::default();
    let module = Module::new(&engine, ADAPTER).expect("the adapter is valid wasm");
    let imports: Vec<(String, String)> = module
        .imports()
        .map(|i| (i.module().to_string(), i.name().to_string()))
        .collect();
    let rng = rng_interface(&module);
    assert!(rng.starts_with("pi:bot-connect/rng@"), "{rng}");
    assert_eq!(
        imports,
        [
            ("env".to_string(), "memory".to_string()),
            ("__main_module__".into(), "cabi_realloc".into()),
            (rng, "random-bytes".into()),
        ]
    );
}
