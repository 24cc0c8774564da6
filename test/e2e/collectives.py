"""Collectives written by hand, on registered submeshes other than the ones
meg-fsdp uses (an expert-style group over dp_outer), run on 4 ranks of a
2 x 2 mesh: each rank takes its own element of the input with shard_slice
over the whole world, then the values go through all_reduce, all_gather
(async), reduce_scatter, an averaged all_reduce of a parameter and
all_to_all (over the whole world and over dp_shard), and cyclic shifts
(over the whole world by 1, over dp_shard by -1 and by 3). Rank 0's
outputs are checked against values worked out here from the rank layout
(row-major over [dp_outer, dp_shard]: rank r has o = r // 2, s = r % 2)."""
import argparse
import os
import sys

import numpy as np

import e2e_util
import mpi_util

MODULE = """
module {
  meg.mesh @world [dp_outer = 2, dp_shard = 2]
  meg.submesh @world[dp_outer]
  meg.submesh @world[dp_shard]
  meg.submesh @world[dp_outer, dp_shard]
  meg.param @expert.w : tensor<3xf32> init #meg.init<normal(1.0)>
  func.func @collect(%x: tensor<4xf32> {meg.name = "x"}) -> (
      tensor<1xf32> {meg.name = "mine"}, tensor<1xf32> {meg.name = "outer_sum"},
      tensor<2xf32> {meg.name = "shard_gather"},
      tensor<1xf32> {meg.name = "shard_scatter"},
      tensor<3xf32> {meg.name = "expert_avg"},
      tensor<4xf32> {meg.name = "world_exchange"},
      tensor<2x2xf32> {meg.name = "shard_exchange"},
      tensor<4xf32> {meg.name = "world_shift"},
      tensor<1xf32> {meg.name = "shard_shift_back"},
      tensor<1xf32> {meg.name = "shard_shift_3"}) {
    %p = meg.shard_slice %x over @world[dp_outer, dp_shard] dim 0
        : tensor<4xf32> -> tensor<1xf32>
    %a = meg.all_reduce %p over @world[dp_outer] sum : tensor<1xf32>
    %f = meg.all_gather_start %p over @world[dp_shard] dim 0
        : tensor<1xf32> -> !meg.future<tensor<2xf32>>
    %g = meg.wait %f : !meg.future<tensor<2xf32>>
    %o = meg.all_gather %p over @world[dp_outer] dim 0
        : tensor<1xf32> -> tensor<2xf32>
    %r = meg.reduce_scatter %o over @world[dp_shard] dim 0 sum
        : tensor<2xf32> -> tensor<1xf32>
    %w = meg.param_ref @expert.w : tensor<3xf32>
    %wp = meg.add %w, %p : tensor<3xf32>, tensor<1xf32>
    %e = meg.all_reduce %wp over @world[dp_outer] avg : tensor<3xf32>
    %ten = arith.constant dense<10.0> : tensor<f32>
    %x10 = meg.mul %x, %ten : tensor<4xf32>, tensor<f32>
    %y = meg.add %x10, %p : tensor<4xf32>, tensor<1xf32>
    %z = meg.all_to_all %y over @world[dp_outer, dp_shard] : tensor<4xf32>
    %y2 = meg.reshape %y : tensor<4xf32> to tensor<2x2xf32>
    %v = meg.all_to_all %y2 over @world[dp_shard] : tensor<2x2xf32>
    %s = meg.shift %y over @world[dp_outer, dp_shard] by 1 : tensor<4xf32>
    %b = meg.shift %p over @world[dp_shard] by -1 : tensor<1xf32>
    %t = meg.shift %p over @world[dp_shard] by 3 : tensor<1xf32>
    return %p, %a, %g, %r, %e, %z, %v, %s, %b, %t
        : tensor<1xf32>, tensor<1xf32>, tensor<2xf32>, tensor<1xf32>,
          tensor<3xf32>, tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>,
          tensor<1xf32>, tensor<1xf32>
  }
}
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    os.makedirs(options.tmp, exist_ok=True)
    source = os.path.join(options.tmp, "collect.mlir")
    artifact = os.path.join(options.tmp, "collect.megc")
    open(source, "w").write(MODULE)
    e2e_util.run(["megc", source, "-o", artifact])
    x = np.array([1.5, -2.0, 4.25, 8.0], np.float32)
    np.save(os.path.join(options.tmp, "x.npy"), x)
    out = os.path.join(options.tmp, "out")
    args = ["megc-run", artifact, "--entry", "collect", "--params", "init:3",
            "--input", f"x={os.path.join(options.tmp, 'x.npy')}",
            "--output-dir", out, "--save-params",
            os.path.join(options.tmp, "params.safetensors")]
    result = mpi_util.run_ranks(4, args)
    if result.returncode != 0:
        sys.exit(f"collectives on 4 ranks failed:\n{result.stdout}"
                 f"{result.stderr}")
    got = {name: np.load(os.path.join(out, name + ".npy")) for name in
           ("mine", "outer_sum", "shard_gather", "shard_scatter",
            "expert_avg", "world_exchange", "shard_exchange", "world_shift",
            "shard_shift_back", "shard_shift_3")}
    # Rank 0: o = 0, s = 0. Element of world rank r = o * 2 + s is x[r].
    element = lambda o, s: x[o * 2 + s]
    w = e2e_util.read_safetensors(
        os.path.join(options.tmp, "params.safetensors"))["expert.w"]
    want = {
        "mine": [element(0, 0)],
        # Over dp_outer: ranks (0, 0) and (1, 0).
        "outer_sum": [element(0, 0) + element(1, 0)],
        # Over dp_shard, in group order: ranks (0, 0) and (0, 1).
        "shard_gather": [element(0, 0), element(0, 1)],
        # Each rank (o, s) gathers [x(0, s), x(1, s)] over dp_outer; the
        # sum over dp_shard keeps piece s = 0 on rank 0.
        "shard_scatter": [element(0, 0) + element(0, 1)],
        # Rank (o, s) contributes w + x(o, s): the average over dp_outer
        # on rank 0 is w + (x(0, 0) + x(1, 0)) / 2, which only an average of
        # different values gives.
        "expert_avg": np.asarray(w) + (element(0, 0) + element(1, 0)) / 2,
        # Rank r sends y_r = 10 x + x[r]; piece i of rank 0's result is
        # piece 0 of rank i's: 10 x[0] + x[i].
        "world_exchange": [10 * x[0] + x[i] for i in range(4)],
        # Over dp_shard (ranks 0 and 1), pieces of 2: row i is row 0 of
        # rank i's y reshaped [2, 2].
        "shard_exchange": [10 * x[0:2] + x[0], 10 * x[0:2] + x[1]],
        # Shifted by 1 around the world, rank 0 holds rank 3's y.
        "world_shift": 10 * x + x[3],
        # Over dp_shard by -1 (and by 3, the same around a group of 2),
        # rank (0, 0) holds rank (0, 1)'s element.
        "shard_shift_back": [element(0, 1)],
        "shard_shift_3": [element(0, 1)],
    }
    for name, value in want.items():
        if not np.allclose(got[name], np.asarray(value, np.float32),
                           rtol=1e-6, atol=0):
            sys.exit(f"{name}: rank 0 got {got[name]}, expected {value}")
    print("collectives on a 2 x 2 mesh: " + ", ".join(
        f"{name} {got[name].tolist()}" for name in want))


if __name__ == "__main__":
    main()
