//===- GenCommand.h - `megc gen` --------------------------------*- C++ -*-===//
//
// The `gen` subcommand of the megc driver: writes a model preset as IR.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_GENCOMMAND_H
#define MEGC_TOOLS_MEGC_GENCOMMAND_H

#include "megc/Gen/Generate.h"

#include "llvm/Support/CommandLine.h"

#include <optional>
#include <string>

namespace megc {

/// The `gen` subcommand; its options register themselves with it.
llvm::cl::SubCommand &genSubCommand();

/// The `import` subcommand (a Hugging Face config as IR); it shares most of
/// `gen`'s options.
llvm::cl::SubCommand &importSubCommand();

/// The generation options the command line gives (the flags `gen`, `import`
/// and `plan` share), for the preset `presetName` or, with `hfConfig`, the
/// Hugging Face config.
gen::GenOptions genOptionsFromFlags(std::optional<std::string> presetName,
                                    std::optional<std::string> hfConfig);

/// Runs `megc gen` or `megc import` after command-line parsing; returns the
/// exit code.
int runGen();

} // namespace megc

#endif // MEGC_TOOLS_MEGC_GENCOMMAND_H
