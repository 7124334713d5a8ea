//! The instruction sets a test runs its kernels on.

use constmat::kernels::{InstructionSet, instruction_set};

/// Each instruction set this CPU has, from its best down to the portable loops.
pub fn instruction_sets() -> Vec<InstructionSet> {
    let best = instruction_set();
    [
        InstructionSet::Avx512,
        InstructionSet::Avx2,
        InstructionSet::Portable,
    ]
    .into_iter()
    .filter(|&isa| isa <= best)
    .collect()
}
