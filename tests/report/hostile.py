"""A model whose every name is an attack on the page or terminal that shows it."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

IMG = "<img src=x onerror=alert(1)>"
CLOSE_SCRIPT = "</script><script>window.pwned=1</script>"
MARKUP = "[bold red]r[/]"
SVG = '"><svg onload=alert(2)>'


def hostile_model() -> onnx.ModelProto:
    """Relu -> Relu -> Relu on x, each node and tensor named to inject markup or script."""
    x = helper.make_tensor_value_info(SVG, TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info(MARKUP, TensorProto.FLOAT, [1, 8])
    nodes = [
        helper.make_node("Relu", [SVG], ["t1"], name=IMG),
        helper.make_node("Relu", ["t1"], ["t2"], name=f"/blk{CLOSE_SCRIPT}/Relu"),
        helper.make_node("Relu", ["t2"], [MARKUP], name=MARKUP),
    ]
    graph = helper.make_graph(nodes, IMG, [x], [y], doc_string=CLOSE_SCRIPT)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
