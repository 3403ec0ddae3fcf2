"""Reading a rich table back from the text a report printed."""

from __future__ import annotations


def table_rows(out: str, title: str) -> tuple[str, list[str]]:
    """The header line and the body rows of the table whose title starts with ``title``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rule = next(i for i in range(start, len(lines)) if "───" in lines[i])
    body = []
    for line in lines[rule + 1 :]:
        if not line.strip():
            break
        body.append(line)
    return lines[rule - 1], body
