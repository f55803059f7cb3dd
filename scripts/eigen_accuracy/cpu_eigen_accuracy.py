#!/usr/bin/python3
"""Accuracy of the CPU backend's OWN eigen-decompositions of the core
blocks C_ss against the long-double truth of inverse_iteration_study.py, for its two modes:
  cpu-lanes   default SIMD lane eigensolver (lane_eigen.*: Householder + implicit QL)
  cpu-lapack  SPEXD_CPU_EIGEN=lapack (dsyevd per block)
Input: per mode, the SPEXD_DUMP_BLOCKS dump (blocks.bin: [nt, i0, nws, nd, C, x] per block)
and its companion blocks.bin.eig written by DumpBlockEigen (patch_eigen.cc, from dump_blocks.patch):
per decomposed block [nt, source (1 lanes, 2 dsyevd, 0 failed), diag C (nt), subdiag C
(nt-1), values (nt), vectors (nt*nt column-major, column j for values[j])], exactly what
DecorrelateCore used. Eigen records are matched to load()'s deduplicated blocks by the
(diag, subdiag) key (bit-exact); duplicates (cold + warm runs) must agree bit for bit.
Products use inverse_iteration_study.py's q_from_eig (GPU clip w >= 1e-14 max w, as compat gpu) and
products(); errors as its Stats (max / p99 over blocks of max|a - a_ref| /
max|a_ref|, and frame-wide max|a - a_ref| / max|a_ref|).

Usage: /usr/bin/python3 scripts/cpu_eigen_accuracy.py LANES.bin LAPACK.bin [--max N]
       [--batch B] [--out FILE]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inverse_iteration_study as st  # noqa: E402


def load_eig(path, nt):
    raw = np.fromfile(path, dtype=np.float64)
    rec = 2 + 3 * nt - 1 + nt * nt
    raw = raw.reshape(-1, rec)
    assert (raw[:, 0] == nt).all()
    key = raw[:, 2:2 + 2 * nt - 1]
    src = raw[:, 1].astype(int)
    w = raw[:, 2 + 2 * nt - 1:2 + 3 * nt - 1]
    V = raw[:, 2 + 3 * nt - 1:].reshape(-1, nt, nt).transpose(0, 2, 1)  # column-major -> V[i, j]
    return key, src, w, V, raw


def match(C, key, src, w, V, raw, label):
    """Eigen record for each of load()'s blocks, by bit-exact (diag, subdiag) of C."""
    nt = C.shape[-1]
    ii = np.arange(nt)
    ck = np.concatenate([C[:, ii, ii], C[:, ii[1:], ii[:-1]]], axis=1)
    index = {}
    ndup = nconflict = 0
    for r in range(key.shape[0]):
        k = key[r].tobytes()
        if k in index:
            ndup += 1
            if not np.array_equal(raw[index[k]], raw[r]):
                nconflict += 1
        else:
            index[k] = r
    rows = []
    for b in range(C.shape[0]):
        r = index.get(ck[b].tobytes())
        assert r is not None, f'{label}: block {b} has no eigen record'
        rows.append(r)
    rows = np.array(rows)
    assert len(set(rows.tolist())) == len(rows), f'{label}: two blocks share a key'
    info = dict(records=key.shape[0], distinct=len(index), dup=ndup, conflicts=nconflict,
                src=np.bincount(src[rows], minlength=3))
    return w[rows], V[rows], info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('lanes')
    ap.add_argument('lapack')
    ap.add_argument('--max', type=int, default=None)
    ap.add_argument('--batch', type=int, default=96)
    ap.add_argument('--out', default=None)
    a = ap.parse_args()

    C, x, g = st.load(a.lanes, a.max)
    C2, x2, _ = st.load(a.lapack, a.max)
    same_blocks = C.shape == C2.shape and np.array_equal(C, C2) and np.array_equal(x, x2)
    nt = g['nt']
    modes = {}
    infos = {}
    for label, path in (('cpu-lanes', a.lanes), ('cpu-lapack', a.lapack)):
        Cm = C if label == 'cpu-lanes' else C2
        w, V, infos[label] = match(Cm, *load_eig(path + '.eig', nt), label)
        modes[label] = (w, V)
    assert same_blocks, 'the two dumps hold different blocks: compare each against its own truth'

    names = ['cpu-lanes', 'cpu-lapack', 'ev', 'evd']
    acc = {}
    extra = {k: [] for k in ('orth_lanes', 'orth_lapack', 'res_lanes', 'res_lapack',
                             'lam_lanes', 'lam_lapack')}
    t0 = time.time()
    B = C.shape[0]
    for s in range(0, B, a.batch):
        sl_ = slice(s, min(s + a.batch, B))
        Cb, xb = C[sl_], x[sl_]
        w1, V1 = st.ref_evd(Cb)
        Qt, _ = st.truth(Cb, w1, V1)
        pt = st.products(Qt, xb.astype(np.longdouble), g)
        cand = {'cpu-lanes': (modes['cpu-lanes'][0][sl_], modes['cpu-lanes'][1][sl_]),
                'cpu-lapack': (modes['cpu-lapack'][0][sl_], modes['cpu-lapack'][1][sl_]),
                'ev': st.ref_scipy(Cb, 'ev'), 'evd': (w1, V1)}
        p1 = None
        for name in names:
            w, V = cand[name]
            p = st.products(st.q_from_eig(w, V), xb, g)
            if name == 'evd':
                p1 = p
            acc.setdefault((name, 'truth'), st.Stats()).add(p, pt)
        for name in names[:-1]:
            w, V = cand[name]
            acc.setdefault((name, 'evd'), st.Stats()).add(st.products(st.q_from_eig(w, V), xb, g), p1)
        wmax = w1[:, -1]
        eye = np.eye(nt)
        for tag, name in (('lanes', 'cpu-lanes'), ('lapack', 'cpu-lapack')):
            w, V = cand[name]
            extra[f'orth_{tag}'].append(np.abs(np.swapaxes(V, 1, 2) @ V - eye).max(axis=(1, 2)))
            extra[f'res_{tag}'].append(np.abs(Cb @ V - V * w[:, None, :]).max(axis=(1, 2)) / wmax)
            extra[f'lam_{tag}'].append(np.abs(np.sort(w, axis=1) - w1).max(axis=1) / wmax)
        print(f'  {sl_.stop}/{B} blocks ({time.time() - t0:.0f} s)', file=sys.stderr, flush=True)
    extra = {k: np.concatenate(v) for k, v in extra.items()}

    lines = [f'CPU backend eigen-decompositions vs long-double truth. Dumps: {a.lanes}, {a.lapack} '
             f'(+ .eig)',
             f'{B} distinct C_ss blocks (n={nt}), core rows [{g["i0"]}, {g["i0"] + g["nws"]}), '
             f'ndiag {g["nd"]}; both dumps hold the same blocks: {same_blocks}.']
    for label, inf in infos.items():
        lines.append(f'  {label}: {inf["records"]} eigen records, {inf["distinct"]} distinct keys, '
                     f'{inf["dup"]} duplicates ({inf["conflicts"]} not bit-identical); source of '
                     f'the blocks used: lanes {inf["src"][1]}, dsyevd {inf["src"][2]}, failed '
                     f'{inf["src"][0]}')
    lines.append('Errors: max_block |a - a_ref| / max_block |a_ref| (max, p99 over blocks); '
                 '"frm" = frame-wide. ev = scipy dsyev, evd = numpy dsyevd (rerun on the same '
                 'blocks).')
    lines.append('')
    lines += st.fmt_table(acc, names, 'truth', 'Against the long-double truth:')
    lines.append('')
    lines += st.fmt_table(acc, names, 'evd', 'Against numpy eigh (dsyevd):')
    lines.append('')
    lines.append('Decomposition quality (per block):')
    for tag in ('lanes', 'lapack'):
        lines.append(st.pct(extra[f'orth_{tag}'], f'cpu-{tag}: max|V^T V - I|'))
        lines.append(st.pct(extra[f'res_{tag}'], f'cpu-{tag}: max|C V - V L| / lmax'))
        lines.append(st.pct(extra[f'lam_{tag}'], f'cpu-{tag}: max|l - l_evd| / lmax'))
    same_vals = np.array_equal(modes['cpu-lapack'][0], st.ref_evd(C)[0]) if B <= 4000 else None
    lines.append(f'cpu-lapack eigenvalues bit-identical to numpy eigh: {same_vals}')
    st.write_report(lines, a.out)


if __name__ == '__main__':
    main()
