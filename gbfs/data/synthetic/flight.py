"""Flight-delay stand-in with the benchm-ml columns, one-hot encoded like the real data."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..formats import encode_flight, encode_flight_categorical
from .base import SyntheticData, check_positive, check_seed, child, finish, n_rows, streams

# The carriers of the 2005-2006 flights benchm-ml samples from
CARRIERS = ("AA", "AQ", "AS", "B6", "CO", "DH", "DL", "EV", "F9", "FL", "HA", "HP", "MQ", "NW", "OH",
            "OO", "TZ", "UA", "US", "WN", "XE", "YV")
# 280 airports: the encoded width is 12 + 31 + 7 + 22 + 280 + 280 + 2 = 634, the paper's
N_AIRPORTS = 280
POSITIVE_RATE = 0.19
# Each of the most frequent carriers has a hub among the busiest airports, from which this share
# of its flights departs: the carrier's and the hub's one-hot columns are correlated (redundant)
N_HUBS, HUB_SHARE = 8, 0.6
# Delay log-odds over the year and the week: cosines of these amplitudes around a peak month / day
SEASON_AMPLITUDE, WEEK_AMPLITUDE = 0.4, 0.3
ROWS_PER_BLOCK = 1 << 16
N_CALIBRATION = 100_000
_LETTERS = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))


def _zipf(n: int, a: float, b: float) -> np.ndarray:
    """Probabilities ``(k + b)^-a``: a few hubs, a long tail (rarest airport ~0.05 %)."""
    p = (np.arange(n) + b) ** -a
    return p / p.sum()


@dataclass(frozen=True)
class _FlightModel:
    """Airports and label effects drawn from the model stream (shared by train and test)."""

    airports: np.ndarray          # codes, most frequent first
    airport_p: np.ndarray
    coords: np.ndarray            # (N_AIRPORTS, 2) positions in miles, for Distance
    carrier_p: np.ndarray
    carrier_effect: dict[str, float]
    origin_effect: dict[str, float]
    hubs: dict[str, int]          # carrier -> index of its hub airport
    month: int                    # the peak of the season
    weekday: int                  # the peak of the week
    intercept: float = 0.0

    def month_effect(self) -> dict[str, float]:
        """The seasonal shift of each month's log-odds (every month's level carries some signal)."""
        # peaking half a month after the start of ``month``, so that no month's shift is zero
        return _cycle(SEASON_AMPLITUDE, self.month + 0.5, 12)

    def weekday_effect(self) -> dict[str, float]:
        """The weekly shift of each day's log-odds."""
        return _cycle(WEEK_AMPLITUDE, self.weekday, 7)

    def logit(self, df: pd.DataFrame) -> np.ndarray:
        """Log-odds of a delay: later departures, a few carriers/origins, the season, one weekday."""
        minutes = (df["DepTime"].to_numpy() // 100) * 60 + df["DepTime"].to_numpy() % 100
        out = self.intercept + 3.0 * np.clip((minutes - 360) / 960.0, 0.0, 1.0)
        out = out + df["UniqueCarrier"].map(self.carrier_effect).fillna(0.0).to_numpy()
        out = out + df["Origin"].map(self.origin_effect).fillna(0.0).to_numpy()
        out = out + df["Month"].map(self.month_effect()).to_numpy(np.float64)
        return out + df["DayOfWeek"].map(self.weekday_effect()).to_numpy(np.float64)


def _cycle(amplitude: float, peak: float, period: int) -> dict[str, float]:
    """``amplitude * cos(2 pi (k - peak) / period)`` for the levels ``"c-1" .. "c-<period>"``."""
    # the C library's cos, not numpy's: numpy's SIMD cos rounds by CPU, and so would the labels
    return {f"c-{k}": amplitude * math.cos(2 * math.pi * (k - peak) / period) for k in range(1, period + 1)}


def _make_model(rng: np.random.Generator) -> _FlightModel:
    codes: set[str] = set()
    while len(codes) < N_AIRPORTS:
        codes.add("".join(rng.choice(_LETTERS, 3)))
    airports = rng.permutation(sorted(codes))
    carrier_p = _zipf(len(CARRIERS), 1.0, 3.0)[rng.permutation(len(CARRIERS))]
    # Effects only on frequent levels, so that they show in samples of a few thousand rows
    top_carriers = np.array(CARRIERS)[np.argsort(-carrier_p)[:8]]
    carriers = rng.choice(top_carriers, 3, replace=False)
    busiest = rng.permutation(12)
    hubs = dict(zip(top_carriers[:N_HUBS].tolist(), busiest[:N_HUBS].tolist()))
    # the origins with an effect are busy airports that are nobody's hub
    origins = airports[rng.choice(busiest[N_HUBS:], 3, replace=False)]
    model = _FlightModel(
        airports=airports, airport_p=_zipf(N_AIRPORTS, 1.2, 5.0),
        coords=rng.uniform((0.0, 0.0), (2600.0, 1200.0), (N_AIRPORTS, 2)), carrier_p=carrier_p,
        carrier_effect=dict(zip(carriers, (0.8, 0.6, -0.7))),
        origin_effect=dict(zip(origins, (0.7, 0.5, -0.6))), hubs=hubs,
        month=int(rng.integers(1, 13)), weekday=int(rng.integers(1, 8)))
    # Intercept set on a calibration sample so that about 19 % of flights are delayed
    base = model.logit(_features(rng, model, N_CALIBRATION))
    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.mean(1 / (1 + np.exp(-(base + mid)))) < POSITIVE_RATE else (lo, mid)
    return replace(model, intercept=(lo + hi) / 2)


def _dep_time(rng: np.random.Generator, rows: int) -> np.ndarray:
    """hhmm in 1..2400: most departures 6:00-22:00, a few at night (2400 is midnight, as in the data)."""
    day = rng.uniform(360, 1320, rows)
    minutes = np.where(rng.random(rows) < 0.97, day, rng.uniform(0, 1440, rows))
    minutes = np.floor(minutes).astype(np.int64) + 1
    return minutes // 60 * 100 + minutes % 60


def _features(rng: np.random.Generator, model: _FlightModel, rows: int) -> pd.DataFrame:
    """The benchm-ml feature columns of ``rows`` flights (dates are real 2005 dates)."""
    dates = np.datetime64("2005-01-01") + rng.integers(0, 365, rows)
    month = dates.astype("datetime64[M]")
    weekday = (dates.astype(np.int64) + 3) % 7 + 1          # 1970-01-01 was a Thursday; Monday = 1
    carrier = np.array(CARRIERS)[rng.choice(len(CARRIERS), rows, p=model.carrier_p)]
    hub = pd.Series(carrier).map(model.hubs).fillna(-1).to_numpy(np.int64)
    origin = rng.choice(N_AIRPORTS, rows, p=model.airport_p)
    origin = np.where((hub >= 0) & (rng.random(rows) < HUB_SHARE), hub, origin)
    dest = rng.choice(N_AIRPORTS, rows, p=model.airport_p)
    dest = np.where(dest == origin, (dest + 1) % N_AIRPORTS, dest)
    miles = np.linalg.norm(model.coords[origin] - model.coords[dest], axis=1) * rng.uniform(1.0, 1.15, rows)
    return pd.DataFrame({
        "Month": _c(month.astype(np.int64) % 12 + 1),
        "DayofMonth": _c((dates - month).astype(np.int64) + 1),
        "DayOfWeek": _c(weekday),
        "DepTime": _dep_time(rng, rows),
        "UniqueCarrier": carrier,
        "Origin": model.airports[origin],
        "Dest": model.airports[dest],
        "Distance": np.maximum(np.rint(miles), 30).astype(np.int64),
    })


def _c(values: np.ndarray) -> np.ndarray:
    """benchm-ml's categorical spelling of small integers: 1 -> "c-1"."""
    return np.char.add("c-", values.astype(str)).astype(object)


def _frame(seq: np.random.SeedSequence, model: _FlightModel, n: int) -> pd.DataFrame:
    """``n`` flights with labels, in blocks of fixed size (row ``i`` does not depend on ``n``)."""
    blocks = []
    for b in range((n + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK):
        rng = np.random.default_rng(child(seq, b))
        df = _features(rng, model, ROWS_PER_BLOCK)
        delayed = rng.random(ROWS_PER_BLOCK) < 1 / (1 + np.exp(-model.logit(df)))
        blocks.append(df.assign(dep_delayed_15min=np.where(delayed, "Y", "N")))
    return pd.concat(blocks, ignore_index=True).iloc[:n].reset_index(drop=True)


def _relevant_names(model: _FlightModel) -> list[str]:
    return (["DepTime"] + [f"Month={m}" for m in model.month_effect()]
            + [f"DayOfWeek={d}" for d in model.weekday_effect()]
            + [f"UniqueCarrier={c}" for c in model.carrier_effect]
            + [f"Origin={o}" for o in model.origin_effect])


def _copy_of(model: _FlightModel, names: list[str]) -> np.ndarray:
    """Each hub's origin column as a noisy copy of its carrier's column (where both are present)."""
    index = {name: j for j, name in enumerate(names)}
    out = np.full(len(names), -1, dtype=np.int64)
    for carrier, hub in model.hubs.items():
        source, copy = index.get(f"UniqueCarrier={carrier}"), index.get(f"Origin={model.airports[hub]}")
        if source is not None and copy is not None:
            out[copy] = source
    return out


def _generate(scale: float, random_state: int) -> tuple[_FlightModel, pd.DataFrame, pd.DataFrame]:
    scale, seed = check_positive("scale", scale), check_seed(random_state)
    rng, train_seq, test_seq = streams(seed)
    model = _make_model(rng)
    n = n_rows(100_000, scale)
    return model, _frame(train_seq, model, n), _frame(test_seq, model, n)


def flight_frames(scale: float = 1.0, random_state: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The raw (train, test) frames of :func:`flight_like`, in benchm-ml's columns and spelling.

    Strings for the categorical columns and the "Y"/"N" label, ints for DepTime and Distance,
    columns in the order of benchm-ml's CSV files (for writing format-exact test files).
    """
    _, train, test = _generate(scale, random_state)
    return train, test


def flight_like(scale: float = 1.0, random_state: int = 0, categorical: bool = False) -> SyntheticData:
    """Stand-in of benchm-ml's Flight delay data: 100 000 + 100 000 rows, about 634 one-hot columns.

    Columns as in benchm-ml: Month, DayofMonth, DayOfWeek ("c-1", ...; from real 2005 dates),
    DepTime (hhmm, 1..2400), UniqueCarrier (22 codes), Origin and Dest (280 made-up airport
    codes with Zipf-like frequencies), Distance (miles between the airports) and
    dep_delayed_15min (about 19 % "Y"). The delay log-odds rise with DepTime, follow a cosine
    over the months and one over the weekdays, and shift for 3 carriers and 3 origins;
    ``relevant`` holds exactly those 26 encoded columns (fewer if a level is absent from a tiny
    sample). The 8 most frequent carriers each fly 60 % of their flights from a hub among the 12
    busiest airports, so each hub's ``Origin`` column is a noisy copy of its carrier's column
    (``copy_of``; the origins with an effect are no hubs). Encoded with
    :func:`gbfs.data.formats.encode_flight`, which keeps the levels present in train or test,
    so at small ``scale`` rare airports may be missing and the width below 634.

    Parameters
    ----------
    scale : float
        Multiplies the row counts (at least 50 rows per split).
    random_state : int
    categorical : bool
        Keep the eight columns before one-hot encoding: the six categorical ones as integer codes
        of their levels (:func:`gbfs.data.formats.encode_flight_categorical`; ``categorical`` and
        ``categories`` of the result say which and what), for categorical splits.  ``relevant``
        then holds the 5 columns the signal depends on.

    Returns
    -------
    SyntheticData
        ``task == "binary"``; names like ``"UniqueCarrier=AA"``, then ``"DepTime"``, ``"Distance"``
        (with ``categorical``: the column names, and no ``copy_of``).
    """
    if not isinstance(categorical, bool):
        raise TypeError(f"categorical must be true or false, got {categorical!r}")
    model, train, test = _generate(scale, random_state)
    if categorical:
        X_train, y_train, X_test, y_test, names, levels = encode_flight_categorical(train, test)
        relevant = sorted({names.index(n.split("=")[0]) for n in _relevant_names(model)})
        return finish(X_train, y_train, X_test, y_test, names, np.array(relevant), "binary",
                      categorical=tuple(range(len(levels))), categories=levels)
    X_train, y_train, X_test, y_test, names = encode_flight(train, test)
    index = {name: j for j, name in enumerate(names)}
    relevant = [index[name] for name in _relevant_names(model) if name in index]
    return finish(X_train, y_train, X_test, y_test, names, np.array(relevant), "binary",
                  copy_of=_copy_of(model, names))


def flight_like_categorical(scale: float = 1.0, random_state: int = 0) -> SyntheticData:
    """:func:`flight_like` before one-hot encoding (``categorical=True``): six categorical columns
    as integer codes, then DepTime and Distance."""
    return flight_like(scale, random_state, categorical=True)
