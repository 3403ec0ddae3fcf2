"""Renderers: one module per output format. Each takes results and returns text or draws on a console."""

from __future__ import annotations
