// A C++ service's use of megrt: load an artifact, initialise or load the
// parameters, run an entry for some steps on inputs from .npy files, then
// write the outputs and the trained weights.
//
//   embed MODEL.megc ENTRY STEPS OUT_DIR [--params FILE] [NAME=FILE.npy ...]
#include "megrt/megrt.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

namespace {

int usage() {
  std::cerr << "usage: embed MODEL.megc ENTRY STEPS OUT_DIR "
               "[--params FILE.safetensors] [NAME=FILE.npy ...]\n";
  return 2;
}

/// Prints the f32 scalars among `outputs` (a loss) on one line.
void printStep(int step, const std::map<std::string, megrt::Tensor> &outputs) {
  std::cout << "step " << step;
  for (const auto &[name, tensor] : outputs)
    if (tensor.dtype() == megrt::DType::F32 && tensor.numElements() == 1) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.9g", *tensor.dataAs<float>());
      std::cout << " " << name << " " << text;
    }
  std::cout << "\n";
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 5)
    return usage();
  std::string model = argv[1], entry = argv[2], outDir = argv[4];
  int steps = std::atoi(argv[3]);
  std::string params;
  std::map<std::string, megrt::Tensor> inputs;
  try {
    for (int i = 5; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--params" && i + 1 < argc) {
        params = argv[++i];
        continue;
      }
      size_t equals = arg.find('=');
      if (equals == std::string::npos)
        return usage();
      inputs[arg.substr(0, equals)] = megrt::readNpy(arg.substr(equals + 1));
    }

    megrt::Session session(megrt::Program::load(model), {"cpu", /*seed=*/0});
    if (!params.empty())
      session.loadParameters(params);
    std::map<std::string, megrt::Tensor> outputs;
    for (int step = 1; step <= steps; ++step) {
      outputs = session.run(entry, inputs);
      printStep(step, outputs);
    }
    for (const auto &[name, tensor] : outputs)
      megrt::writeNpy(outDir + "/" + name + ".npy", tensor);
    session.saveParameters(outDir + "/params.safetensors");
  } catch (const megrt::Error &error) {
    // The message names the object, what was expected and what was found.
    std::cerr << "embed: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
