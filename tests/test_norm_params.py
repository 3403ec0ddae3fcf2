"""analysis.norms: the ones and zeros torch's exporters give an InstanceNormalization for a
norm that has no such params in torch are none. Expected counts are worked out by hand."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxcost

F = TensorProto.FLOAT


def _instance_norm(
    scale: np.ndarray,
    bias: np.ndarray,
    names: tuple[str, str] = ("val_8", "val_11"),
    *,
    producer: str = "pytorch",
    as_constants: bool = False,
) -> int:
    """x [1, 4, 3, 3] -> InstanceNormalization(x, scale, bias), the two stored as initializers
    named ``names`` (or as Constants' outputs, as the TorchScript exporter writes them), in a
    model made by ``producer``: the params counted."""
    nodes = [helper.make_node("InstanceNormalization", ["x", *names], ["y"])]
    values = [
        numpy_helper.from_array(v.astype(np.float32), n)
        for v, n in zip((scale, bias), names, strict=True)
    ]
    inits = values
    if as_constants:
        inits = []
        nodes = [
            *(helper.make_node("Constant", [], [v.name], value=v) for v in values),
            *nodes,
        ]
    return _params_of(nodes, inits, producer)


def _params_of(nodes: list[onnx.NodeProto], stored: list[onnx.TensorProto], producer: str) -> int:
    """The params counted in the graph of ``nodes`` from x [1, 4, 3, 3] to y, the same shape,
    made by ``producer``."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, 4, 3, 3])],
        [helper.make_tensor_value_info("y", F, [1, 4, 3, 3])],
        stored,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.producer_name = producer
    return onnxcost.analyze(model).totals.params


def test_torchs_instance_norm_without_affine_params_has_none() -> None:
    ones, zeros = np.ones(4), np.zeros(4)
    # nn.InstanceNorm2d(4) (affine=False) from the dynamo exporter: ones [4] and zeros [4]
    # named val_8 and val_11, made up for the op: 0 (8 were counted)
    assert _instance_norm(ones, zeros) == 0
    # from the TorchScript exporter, two Constants: 0
    names = ("/i/Constant_output_0", "/i/Constant_1_output_0")
    assert _instance_norm(ones, zeros, names, as_constants=True) == 0


def test_instance_norm_params_that_are_the_models_own_count() -> None:
    ones, zeros = np.ones(4), np.zeros(4)
    # nn.InstanceNorm2d(4, affine=True) at init: its own norm.weight and norm.bias, 4 + 4
    assert _instance_norm(ones, zeros, ("norm.weight", "norm.bias")) == 8
    # trained (not ones and zeros), whatever their names: 8
    assert _instance_norm(np.full(4, 0.5), zeros) == 8
    # another producer's (tf2onnx: a learned gamma and beta at init): 8
    assert _instance_norm(ones, zeros, producer="tf2onnx") == 8


def test_a_groupnorm_from_torch_counts_its_weight_and_bias_only() -> None:
    # nn.GroupNorm(2, 4) as torch's exporters write it: x [1, 4, 3, 3] reshaped to [1, 2, 18],
    # InstanceNormalization with ones [2] and zeros [2] (made up), reshaped back, times the
    # weight [4, 1, 1] plus the bias [4, 1, 1]: 4 + 4 = 8, torch's (12 were counted)
    nodes = [
        helper.make_node("Reshape", ["x", "grouped"], ["g"]),
        helper.make_node("InstanceNormalization", ["g", "val_8", "val_11"], ["n"]),
        helper.make_node("Reshape", ["n", "back"], ["r"]),
        helper.make_node("Mul", ["r", "gn.weight"], ["m"]),
        helper.make_node("Add", ["m", "gn.bias"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([1, 2, 18], np.int64), "grouped"),
        numpy_helper.from_array(np.array([1, 4, 3, 3], np.int64), "back"),
        numpy_helper.from_array(np.ones(2, np.float32), "val_8"),
        numpy_helper.from_array(np.zeros(2, np.float32), "val_11"),
        numpy_helper.from_array(
            np.linspace(0.5, 1.5, 4, dtype=np.float32).reshape(4, 1, 1), "gn.weight"
        ),
        numpy_helper.from_array(
            np.linspace(-1, 1, 4, dtype=np.float32).reshape(4, 1, 1), "gn.bias"
        ),
    ]
    assert _params_of(nodes, inits, "pytorch") == 8


def test_a_scale_whose_data_and_dims_disagree_is_read_as_no_made_up_one() -> None:
    # 3 bytes for 4 floats: no ones are read in it, so both count as stored, 4 + 4 (the
    # analysis goes on; the file is broken where a runtime loads it)
    scale = onnx.TensorProto(name="val_8", data_type=F, dims=[4], raw_data=b"\0" * 3)
    bias = numpy_helper.from_array(np.zeros(4, np.float32), "val_11")
    nodes = [helper.make_node("InstanceNormalization", ["x", "val_8", "val_11"], ["y"])]
    assert _params_of(nodes, [scale, bias], "pytorch") == 8


def test_a_layer_norm_without_a_bias_counts_its_weight_only() -> None:
    # nn.LayerNorm(3, bias=False) over x's last dim, from the TorchScript exporter: its
    # weight ln.weight and a Constant of zeros [3] for the bias: 3, torch's (6 were counted)
    weight = numpy_helper.from_array(np.linspace(0.5, 1.5, 3, dtype=np.float32), "ln.weight")
    zeros = numpy_helper.from_array(np.zeros(3, np.float32), "/ln/Constant_output_0")
    ones = numpy_helper.from_array(np.ones(3, np.float32), "/ln/Constant_1_output_0")

    def layer_norm(scale: onnx.TensorProto, producer: str = "pytorch") -> int:
        nodes = [
            helper.make_node("Constant", [], [zeros.name], value=zeros),
            helper.make_node("LayerNormalization", ["x", scale.name, zeros.name], ["y"], axis=-1),
        ]
        stored = [scale]
        if scale is ones:
            nodes.insert(0, helper.make_node("Constant", [], [ones.name], value=ones))
            stored = []
        return _params_of(nodes, stored, producer)

    assert layer_norm(weight) == 3
    # elementwise_affine=False: ones and zeros, both made up: 0
    assert layer_norm(ones) == 0
    # another producer's: as stored, 3 + 3
    assert layer_norm(weight, producer="tf2onnx") == 6


def test_a_layer_norms_stored_ones_and_zeros_are_its_params() -> None:
    # an untrained LayerNorm(3) whose params are stored under names that are no param paths
    # (gamma_1, beta_2: onnxruntime's test models): its own, 3 + 3 = 6
    stored = [
        numpy_helper.from_array(np.ones(3, np.float32), "gamma_1"),
        numpy_helper.from_array(np.zeros(3, np.float32), "beta_2"),
    ]
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma_1", "beta_2"], ["y"], axis=-1)]
    assert _params_of(nodes, stored, "pytorch") == 6
