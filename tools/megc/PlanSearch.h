//===- PlanSearch.h - `megc plan --gpus N` ----------------------*- C++ -*-===//
//
// The search over the parallel layouts of N devices: every layout is
// estimated from compiled slices of itself (megc/Plan/Estimate.h), and the
// ones the estimate ranks first are compiled whole and simulated.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_TOOLS_MEGC_PLANSEARCH_H
#define MEGC_TOOLS_MEGC_PLANSEARCH_H

#include "megc/Gen/Generate.h"
#include "megc/Plan/Cluster.h"

#include "mlir/IR/MLIRContext.h"

#include <string>

namespace megc {

struct SearchRequest {
  gen::GenOptions base;
  /// How a user generates the model: `megc gen llama`, `megc import DIR`.
  std::string genCommand;
  int64_t devices = 1;
  /// Bytes a rank may use.
  double budget = 0;
  /// Layouts to compile and list.
  int64_t top = 5;
  bool json = false;
  /// Where to write the best plan's simulated step as a Chrome trace
  /// (empty: nowhere).
  std::string traceFile;
  /// Seconds after which no further candidate is compiled once one fits.
  double timeLimit = 540;
};

/// Returns the exit code.
int runSearch(const SearchRequest &request, const plan::Cluster &cluster,
              mlir::MLIRContext &context);

} // namespace megc

#endif // MEGC_TOOLS_MEGC_PLANSEARCH_H
