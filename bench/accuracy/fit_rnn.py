#!/usr/bin/env python3
"""Fits layers/recurrent.c's cuDNN rules to probe_rnn.py's runs.

usage: fit_rnn.py [DATA.json ...]   (default: data/rnn/rnn_grid_h100_run2.json,
                                      rnn_axes_h100_run2.json, rnn_large_h100_run3.json)

Prints, per mode (LSTM, GRU, RNN_TANH):
  - the reserve space rule's error on every record: float32
    4 * (T*N*H * (L*D*k + (L-1)*D) + L*D*m*N*H), half precision
    h * L*D*T*N*H + 2 * (L-1)*D*T*N*H + 2 * L*D*m*N*H, rounded to 512;
  - least-squares coefficients (in bytes, what a peak adds up) of the
    call's transient bytes (training
    forward, eval-mode forward, backward) in 1, L*D, the call's weight bytes,
    D*T*N*H*es and T*N*I*es, with their median, 90th-percentile and largest
    relative errors, and the errors on the zoo's own calls (lstm_tagger,
    gru_kws, char_rnn at batches 1, 8, 64).
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = [os.path.join(HERE, "data/rnn", f)
           for f in ("rnn_grid_h100_run2.json", "rnn_axes_h100_run2.json", "rnn_large_h100_run3.json")]
RESERVE = {"LSTM": (5, 2, 14), "GRU": (6, 1, 15), "RNN_TANH": (1, 1, 3)}  # k, m, h
ZOO_CALLS = [(64, 128, 256, 2), (100, 80, 384, 2), (256, 64, 512, 3)]  # T, I, H, L


def reserve(r):
    T, N, H, L, D = r["T"], r["N"], r["H"], r["L"], r["D"]
    k, m, h = RESERVE[r["mode"]]
    if r["dtype"] == "float32":
        b = 4 * (T * N * H * (L * D * k + (L - 1) * D) + L * D * m * N * H)
    else:
        b = h * L * D * T * N * H + 2 * (L - 1) * D * T * N * H + 2 * L * D * m * N * H
    return (b + 511) // 512 * 512


def features(r):
    es = 4 if r["dtype"] == "float32" else 2
    T, N, I, H, L, D = r["T"], r["N"], r["I"], r["H"], r["L"], r["D"]
    return [1, L * D, r["param_bytes"], D * T * N * H * es, T * N * I * es]


def main():
    records = []
    for path in sys.argv[1:] or DEFAULT:
        records += [r for r in json.load(open(path))["records"] if "error" not in r]
    for mode in RESERVE:
        rs = [r for r in records if r["mode"] == mode]
        err = np.array([abs(reserve(r) - r["kept"]) / r["kept"] for r in rs])
        f32 = np.array([r["dtype"] == "float32" for r in rs])
        print(f"{mode} reserve: float32 within 1% on {int((err[f32] <= 0.01).sum())} of {int(f32.sum())}, "
              f"median {np.median(err[f32]):.4f}, largest {err[f32].max():.3f}; half precision largest "
              f"{err[~f32].max():.3f}")
        for key in ("fwd_transient", "eval_transient", "bwd_transient"):
            A = np.array([features(r) for r in rs], float)
            y = np.array([r[key] for r in rs], float)
            c, *_ = np.linalg.lstsq(A, y, rcond=None)  # bytes: what a peak is made of
            e = np.abs(A @ c - y) / y
            zoo = [f"N{r['N']}:{(np.array(features(r)) @ c - r[key]) / r[key]:+.2f}" for r in rs
                   if (r["T"], r["I"], r["H"], r["L"]) in ZOO_CALLS]
            print(f"  {key:15} {{{', '.join(f'{v:.4g}' for v in c)}}}  median {np.median(e):.3f} "
                  f"p90 {np.percentile(e, 90):.3f} max {e.max():.3f}  zoo {' '.join(zoo)}")


if __name__ == "__main__":
    main()
