"""The quantities a measurement can be, as field types every schema shares.

A certificate, plan, manifest or ledger is read by :func:`afford.core.io.loads_json` (size, nesting,
every number finite and of sane magnitude), then by its schema, whose fields say what each
number is. What no measurement can be is refused at load, naming the field, by the one range
check :func:`afford.core.units.bounded`: a negative byte count or time, a step of a nanosecond or
less, a sweep value or shape dimension of 0, a device ceiling of 0 FLOP/s, a date before
1970. A reader downstream (plan, fit, report) then never divides by zero or leaves the floats
on a figure that came from a file.
"""

from datetime import datetime
from functools import partial
from typing import Annotated

from pydantic import AfterValidator

from afford.core.units import (
    MAX_BYTES,
    MAX_COUNT,
    MAX_FLOPS,
    MAX_MAGNITUDE,
    MAX_RATE,
    MAX_SECONDS,
    MIN_DEVICE_BYTES,
    MIN_FRACTION,
    MIN_SECONDS,
    bounded,
    check_date,
    whole,
)


def _number(value, *, what: str, **limits):
    bounded(value, what, **limits)
    return value


def _whole(value, *, what: str, **limits):
    return whole(value, what, **limits)


def _quantity(kind: type, what: str, **limits):
    return Annotated[kind, AfterValidator(partial(_number, what=what, **limits))]


def _count(what: str, **limits):
    return Annotated[int, AfterValidator(partial(_whole, what=what, **limits))]


# A step (or call, or write) time: at least a nanosecond, at most a century.
Seconds = _quantity(float, "a time in seconds", low=MIN_SECONDS, high=MAX_SECONDS,
                    low_open=False)
# A duration that may be zero (a stage that did nothing, an idle gap): [0, a century].
Duration = _quantity(float, "a duration in seconds", high=MAX_SECONDS, low_open=False)
# A byte count (memory, a file): [0, a zebibyte].
Bytes = _count("a byte count", low=0, high=MAX_BYTES)
# A capacity (a device's memory, a buffer): [1 byte, a zebibyte].
Capacity = _count("a size in bytes", low=1, high=MAX_BYTES)
# A device's memory (or a CPU host's): from a mebibyte, so that any budget fraction of it
# (at least 1e-6) holds a byte.
DeviceMemory = _count("a device's memory in bytes", low=MIN_DEVICE_BYTES, high=MAX_BYTES)
# A byte figure that a fit or a median gives (a float): [0, a zebibyte].
ByteFigure = _quantity(float, "a byte figure", high=MAX_BYTES, low_open=False)
# A count of things (parameters, tokens, steps, calls): [0, 1e18].
Count = _count("a count", low=0, high=MAX_COUNT)
# A sweep value, a shape's dimension, a batch: a whole number from 1 to 1e18.
Dim = _count("a dimension", low=1, high=MAX_COUNT)
# A sweep value or a law's x held as a float (tokens, parameters): from 1 to 1e18.
Extent = _quantity(float, "a sweep value", low=1.0, high=MAX_COUNT, low_open=False)
# A device's rate (FLOP/s, B/s): from 1 to 1e30; a ceiling of 0 is no measurement.
Rate = _quantity(float, "a rate per second", low=1.0, high=MAX_RATE, low_open=False)
# FLOPs of a step or a call: [0, 1e40].
Flops = _quantity(float, "a FLOP count", high=MAX_FLOPS, low_open=False)
# A ratio or share that is not negative (IQR / median, an error's size): [0, 1e60].
Ratio = _quantity(float, "a ratio", high=MAX_MAGNITUDE, low_open=False)
# A share of device memory a budget may fill: [1e-6, 1].
Fraction = _quantity(float, "a fraction", low=MIN_FRACTION, high=1.0, low_open=False)
# A moment: time-zone aware (naive is UTC), from 1970 to 9000.
Timestamp = Annotated[datetime, AfterValidator(partial(check_date, what="a date"))]
