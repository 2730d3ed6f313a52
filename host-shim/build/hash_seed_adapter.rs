//! The hash-seed adapter: gives std's `HashMap` seed to the bridge through its own
//! audited `rng` import instead of `wasi:random/insecure-seed`.
//!
//! On `wasm32-wasip2`, std seeds every `RandomState` (so every `HashMap` pulldown-cmark
//! and regex-lite build inside the guest) from `wasi:random/insecure-seed`. That import
//! is randomness outside the bridge world: it widens the boundary the capability audit
//! shows, and replaying a session's imports would not reproduce it (architecture C4).
//! The guest's own code cannot avoid it: the maps live inside those crates.
//!
//! wit-component (inside `wasm-component-ld`) satisfies a core import module with an
//! *adapter module* of the same name, the way the WASI preview1 adapter works. This
//! adapter is that module for std's seed import: it exports `insecure-seed` and
//! implements it with one `random-bytes(16)` call, so the component imports no
//! `wasi:random` at all and the maps still get 128 unpredictable bits per instance.
//!
//! The module is two short functions, so it is written with `wasm-encoder` here rather
//! than kept as a committed binary nobody can review.

use wasm_encoder::{
    CodeSection, Component, ComponentExportKind, ComponentExportSection, ComponentType,
    ComponentTypeRef, ComponentTypeSection, ComponentValType, CustomSection, EntityType,
    ExportKind, ExportSection, Function, FunctionSection, ImportSection, InstanceType, Instruction,
    MemArg, MemoryType, Module, PrimitiveValType, TypeSection, ValType,
};

/// The core import module std's `wasi` crate uses for the seed in the pinned toolchain
/// (rust-toolchain.toml). A toolchain whose std imports another version leaves this
/// adapter unused, and the component imports `wasi:random` again: the host then refuses
/// it at load, and `component_imports_only_the_audited_interfaces` fails.
pub const STD_SEED_MODULE: &str = "wasi:random/insecure-seed@0.2.4";

/// Bytes of seed std asks for: two `u64` keys.
const SEED_LEN: i32 = 16;

/// The adapter module, importing `random-bytes` from `rng_interface`
/// (e.g. `pi:bot-connect/rng@0.2.0`).
pub fn module(rng_interface: &str) -> Vec<u8> {
    let mut types = TypeSection::new();
    let realloc_ty = 0;
    types.ty().function(
        [ValType::I32, ValType::I32, ValType::I32, ValType::I32],
        [ValType::I32],
    );
    // Lowered `random-bytes: func(len: u32) -> list<u8>`: (len, return area).
    let random_bytes_ty = 1;
    types.ty().function([ValType::I32, ValType::I32], []);
    // Lowered `insecure-seed: func() -> tuple<u64, u64>`: (return area).
    let seed_ty = 2;
    types.ty().function([ValType::I32], []);

    let mut imports = ImportSection::new();
    // wit-component hands an adapter the main module's memory and exports.
    imports.import(
        "env",
        "memory",
        MemoryType {
            minimum: 0,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        },
    );
    let main_realloc = 0;
    imports.import(
        "__main_module__",
        "cabi_realloc",
        EntityType::Function(realloc_ty),
    );
    let random_bytes = 1;
    imports.import(
        rng_interface,
        "random-bytes",
        EntityType::Function(random_bytes_ty),
    );

    let mut functions = FunctionSection::new();
    let import_realloc = 2;
    functions.function(realloc_ty);
    let insecure_seed = 3;
    functions.function(seed_ty);

    let mut exports = ExportSection::new();
    // The list `random-bytes` returns is allocated with the guest's own allocator: the
    // adapter has no memory of its own. Those 16 bytes are not freed (the guest's
    // `cabi_realloc` cannot free); std asks once per instance, so it is 16 bytes for
    // the instance's lifetime.
    exports.export("cabi_import_realloc", ExportKind::Func, import_realloc);
    exports.export("insecure-seed", ExportKind::Func, insecure_seed);

    let mut code = CodeSection::new();
    let mut realloc = Function::new([]);
    for param in 0..4 {
        realloc.instruction(&Instruction::LocalGet(param));
    }
    realloc.instruction(&Instruction::Call(main_realloc));
    realloc.instruction(&Instruction::End);
    code.function(&realloc);

    // Params: 0 = std's return area (16 bytes, 8-aligned). Locals: 1 = the list's address.
    let (ret, list) = (0, 1);
    let mut seed = Function::new([(1, ValType::I32)]);
    // random-bytes(16) writes (address, length) of its list into the first 8 bytes of
    // std's return area, which the keys overwrite below.
    seed.instruction(&Instruction::I32Const(SEED_LEN));
    seed.instruction(&Instruction::LocalGet(ret));
    seed.instruction(&Instruction::Call(random_bytes));
    // A host that answers with fewer bytes would leave part of the seed predictable:
    // trap instead of hashing with a weak key.
    seed.instruction(&Instruction::LocalGet(ret));
    seed.instruction(&Instruction::I32Load(mem(4, 2)));
    seed.instruction(&Instruction::I32Const(SEED_LEN));
    seed.instruction(&Instruction::I32Ne);
    seed.instruction(&Instruction::If(wasm_encoder::BlockType::Empty));
    seed.instruction(&Instruction::Unreachable);
    seed.instruction(&Instruction::End);
    seed.instruction(&Instruction::LocalGet(ret));
    seed.instruction(&Instruction::I32Load(mem(0, 2)));
    seed.instruction(&Instruction::LocalSet(list));
    for offset in [0, 8] {
        seed.instruction(&Instruction::LocalGet(ret));
        seed.instruction(&Instruction::LocalGet(list));
        // The list is byte-aligned; the return area is 8-aligned.
        seed.instruction(&Instruction::I64Load(mem(offset, 0)));
        seed.instruction(&Instruction::I64Store(mem(offset, 3)));
    }
    seed.instruction(&Instruction::End);
    code.function(&seed);

    let world = component_type(rng_interface);
    let mut module = Module::new();
    module
        .section(&types)
        .section(&imports)
        .section(&functions)
        .section(&exports)
        .section(&code)
        .section(&CustomSection {
            name: "component-type".into(),
            data: world.as_slice().into(),
        });
    module.finish()
}

fn mem(offset: u64, align: u32) -> MemArg {
    MemArg {
        offset,
        align,
        memory_index: 0,
    }
}

/// The adapter's world, in the `component-type` format wit-component reads from the
/// custom section of the same name (what `wit-bindgen` embeds for the guest itself):
///
/// ```wit
/// package bot-connect:build;
/// world hash-seed-adapter { import pi:bot-connect/rng@0.2.0; }
/// ```
///
/// wit-component needs it to lower `random-bytes` for the adapter; it merges the `rng`
/// interface with the guest's own, so a signature that drifted from wit/rng.wit fails
/// the link instead of shipping.
fn component_type(rng_interface: &str) -> Vec<u8> {
    let mut rng = InstanceType::new();
    let list_u8 = 0;
    rng.ty().defined_type().list(PrimitiveValType::U8);
    let random_bytes = 1;
    rng.ty()
        .function()
        .params([("len", PrimitiveValType::U32)])
        .result(Some(ComponentValType::Type(list_u8)));
    rng.export("random-bytes", ComponentTypeRef::Func(random_bytes));

    let mut world = ComponentType::new();
    world.ty().instance(&rng);
    world.import(rng_interface, ComponentTypeRef::Instance(0));

    let mut package = ComponentType::new();
    package.ty().component(&world);
    package.export(
        "bot-connect:build/hash-seed-adapter",
        ComponentTypeRef::Component(0),
    );

    let mut types = ComponentTypeSection::new();
    types.component(&package);
    let mut exports = ComponentExportSection::new();
    exports.export("hash-seed-adapter", ComponentExportKind::Type, 0, None);

    let mut component = Component::new();
    // Format 4 of the section, strings in UTF-8 (wit-component's metadata encoding).
    component.section(&CustomSection {
        name: "wit-component-encoding".into(),
        data: [4u8, 0].as_slice().into(),
    });
    component.section(&types).section(&exports);
    component.finish()
}
