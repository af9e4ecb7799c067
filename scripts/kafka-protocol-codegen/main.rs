//! The entry point Strand gives kafka-protocol-rs's `protocol_codegen` in place of its own,
//! which clones Apache Kafka from GitHub at a pinned commit: this one reads the message
//! schemas from a directory (those of a kafka-clients jar) and writes the generated
//! modules into a crate's `src/messages`. The generation itself is the generator's.
//! Used by scripts/regenerate-kafka-protocol.

use failure::Error;
use std::fs;
use std::path::PathBuf;

pub mod generate_messages;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, schema_dir, messages_module_dir] = args.as_slice() else {
        panic!("usage: protocol_codegen SCHEMA_DIR MESSAGES_MODULE_DIR");
    };
    for file in fs::read_dir(messages_module_dir)? {
        let path = file?.path();
        if path.extension() == Some("rs".as_ref()) {
            fs::remove_file(path)?;
        }
    }
    let mut inputs: Vec<PathBuf> = fs::read_dir(schema_dir)?
        .map(|file| file.map(|f| f.path()))
        .collect::<Result<_, _>>()?;
    inputs.retain(|path| path.extension() == Some("json".as_ref()));
    inputs.sort();
    generate_messages::run(messages_module_dir, inputs)?;
    Ok(())
}
