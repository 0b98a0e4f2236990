"""Rotary position embedding (RoPE): each pair of a head's features rotated by position * theta^(-2i/D)."""

from . import reference  # noqa: F401
