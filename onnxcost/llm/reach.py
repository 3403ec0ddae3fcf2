"""Where a decoder stops running: a length its exporter fixed (a traced sliding window, a
position table), met by ``llm``'s analysis at a prompt or a decode step."""

from __future__ import annotations

from collections.abc import Mapping

from onnxcost.errors import ShapeError


def beyond_reach(
    error: ShapeError,
    point: Mapping[str, int],
    roles: Mapping[str, str],
    tokens: tuple[int, int],
    given: Mapping[str, int],
) -> ShapeError:
    """``llm``'s error where its analysis at ``point`` breaks at a node (``error.node``): the
    batch, seq and past there (``roles``: each one's symbol -> its role), the ``--prompt`` and
    ``--generate`` (``tokens``) that reach it and the ``--dim`` flags given; the analysis's own
    message names ``--dim`` flags the user never passed. Without a node, ``error`` itself."""
    if not error.node:
        return error
    at = ", ".join(f"{role} {point[symbol]}" for symbol, role in roles.items())
    flags = "".join(f", --dim {symbol}={value}" for symbol, value in given.items())
    return ShapeError(
        f"the model does not run at {at} (--prompt {tokens[0]} --generate {tokens[1]}{flags}): "
        f"{error.node}; a length its exporter fixed stops it there (a traced sliding window "
        "or position table): pass a shorter --prompt or --generate, or export the model with "
        "that length symbolic",
        node=error.node,
    )
