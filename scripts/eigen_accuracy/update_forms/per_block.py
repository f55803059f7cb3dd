#!/usr/bin/python3
# per_block.py BLOCKS.bin OURS.bin OUT.npz: runs gpu_path_accuracy.py unchanged (runpy) and
# keeps its per-block relative errors (max|a - a_true| / max|a_true| per block) of every row.
import os, runpy, sys
import numpy as np
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'gpu_path_accuracy.py')
out = sys.argv.pop(3)
g = runpy.run_path(script, run_name='__main__')
np.savez(out, **{'%s_%s' % (row, k): np.concatenate(st.diff[k]) / np.concatenate(st.refmax[k])
                 for row, st in g['acc'].items() for k in ('ivar', 'flux', 'Rband')})
