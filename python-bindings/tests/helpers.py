"""Assertions the megc package tests share."""


def assert_bitwise(got, want):
    """Same dtype, shape and bytes (NaNs included)."""
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes()
