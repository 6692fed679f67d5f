"""hostile.py --ampc AMPC --work DIR [--timeout S] [-k NAME] — the hostile-input corpus.

Writes small models, tensors and files crafted as an attacker or a careless user would (hostile
names, outputs that point at inputs or devices, truncated libraries, values that overflow or never
end, absurd sizes, inconsistent files), then runs the `ampc` command line on each case as a user
would and checks, for every command of every case:

  - it ends by itself, the case's commands together within its time limit (30 s), and is not
    killed by a signal;
  - no AddressSanitizer / UndefinedBehaviorSanitizer report (the debug preset's ampc);
  - its exit status is the expected one, and a refusal's message names the problem (the file,
    tensor or node, and what is wrong), as the case lists;
  - no raw control byte from the model reaches the terminal;
  - every input file of the case is unchanged afterwards (same bytes, same kind of file);
  - generated C, CUDA and header, once comments and string literals are stripped, contain no
    text planted in the model's names, and a library built from hostile names runs no planted
    code when it is loaded.

The corpus is generated (deterministic, a few MB at most) into DIR; nothing of it is committed.
Prints one line per case and ends with 'N passed, N failed'. Needs the onnx and numpy packages
(the project's .venv: scripts/gen-onnx-tests.sh).
"""
import argparse
import hashlib
import os
import re
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT

# Text planted in names: each would change generated code if copied into it unescaped.
PLANT_C = '*/\n__attribute__((constructor)) static void planted(void) { system("touch PLANTED"); }\n/*'
PLANT_CUDA = 'x\n#error planted\n__device__ int planted_device;\n// '
PLANT_LINE = 'y ??/\nint planted_splice;'
ESCAPES = '\x1b[2J\x1b]0;planted\x07\x9b1m'
QUOTES = '"q\'\\\\ \x01\x7f ../../etc/passwd'
MARKERS = ['planted', 'PLANTED', '#error', 'system(']


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def save(model, path, ir=8):
    model.ir_version = ir
    with open(path, 'wb') as f:
        f.write(model.SerializeToString())


def mk(nodes, inputs, outputs, inits=(), opset=17, name='g', doc=''):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits), doc_string=doc)
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def mlp(names, doc=''):
    """A model whose every name comes from `names`: MatMul + Add + Relu, a Sigmoid*x chain, a
    ReduceSum and a LayerNormalization, so that it has cuBLASLt steps and generated kernels."""
    x, w, b, h, r, s, sx, red, ln, sc, bi, y, y2, axes = names[:14]
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node('MatMul', [x, w], [h], name=names[14]),
        helper.make_node('Add', [h, b], [r], name=names[15]),
        helper.make_node('Relu', [r], [s], name=names[16]),
        helper.make_node('Sigmoid', [s], [sx], name=names[17]),
        helper.make_node('Mul', [sx, s], [red], name=names[18]),
        helper.make_node('LayerNormalization', [red, sc, bi], [ln], name=names[19], axis=-1),
        helper.make_node('ReduceSum', [ln, axes], [y2], name=names[20], keepdims=0),
        helper.make_node('Neg', [ln], [y], name=names[21]),
    ]
    inits = [const(w, rng.standard_normal((8, 16)).astype(np.float32)),
             const(b, rng.standard_normal(16).astype(np.float32)),
             const(sc, np.ones(16, np.float32)), const(bi, np.zeros(16, np.float32)),
             const(axes, np.array([1], np.int64))]
    m = mk(nodes, [vi(x, F, [4, 8])], [vi(y, F, [4, 16]), vi(y2, F, [4])], inits,
           name=names[22], doc=doc)
    m.doc_string = doc
    m.producer_name = doc[:40]
    return m


N_MLP_NAMES = 23


def hostile_names():
    kinds = [PLANT_C, PLANT_CUDA, PLANT_LINE, ESCAPES, QUOTES, '', '//', '/*', '*/', '\\', '??/',
             '#pragma once\n#include </etc/passwd>', 'a' * 300, 'µ名前', '../x', '\r\n', '%s%n',
             '__attribute__((constructor))', '"', "'", '\t', 'z', 'w']
    # Value names must be unique and non-empty; node names may repeat, but keep them unique too.
    return ['%s#%d' % (k, i) if k else '#%d' % i for i, k in enumerate(kinds[:N_MLP_NAMES])]


def exporter_names():
    # In mlp()'s order: values x w b h r s sx red ln sc bi y y2 axes, then the nodes, the graph.
    return ['input.1', 'onnx::MatMul_12', 'fc.bias', '/blk.0/MatMul_output_0', '/blk.0/Add_output_0',
            '/blk.0/Relu_output_0', '/blk.0/act/Sigmoid_output_0', '/blk.0/act/Mul_output_0',
            '/ln/LayerNormalization_output_0', 'ln.weight', 'ln.bias', 'logits:0', 'pooled:0',
            'onnx::ReduceSum_7', '/blk.0/MatMul', '/blk.0/Add', '/blk.0/Relu', '/blk.0/act/Sigmoid',
            '/blk.0/act/Mul', '/ln/LayerNormalization', '/head/ReduceSum', '/head/Neg', 'main_graph']


def npy(path, arr):
    np.save(path, np.asarray(arr))


# ---- cases ------------------------------------------------------------------------------------
# A case: a folder of files, a list of commands (argv after `ampc`), each with the exit statuses
# it may end with and substrings its output must (`want`) or must not (`unwanted`) contain.
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


class Cmd:
    def __init__(self, args, rc=(0,), want=(), unwanted=(), setup=None, after=None):
        self.args, self.rc, self.want, self.unwanted = args, rc, want, unwanted
        self.setup, self.after = setup, after


@case
def injection_in_names(d):
    """Names that are C/CUDA code, comment ends, trigraph splices and terminal escapes compile
    into a library whose generated sources hold none of them outside literals, and that runs no
    planted code when loaded."""
    save(mlp(hostile_names(), doc=PLANT_C + ESCAPES), d + '/m.onnx')
    return [Cmd(['m.onnx', '--emit', 'c', '-o', 'm.c'], after=no_plant('m.c')),
            Cmd(['m.onnx', '--emit', 'cuda', '-o', 'm.cu'], after=no_plant('m.cu')),
            Cmd(['m.onnx', '--emit', 'ir', '-o', 'm.ir']),
            Cmd(['m.onnx', '-o', 'libm.so', '--report', 'm.json'], after=all_of(no_plant('libm.h'), json_ok('m.json'))),
            Cmd(['inspect', 'libm.so'], after=no_file('PLANTED')),
            Cmd(['inspect', 'm.onnx']),
            Cmd(['run', 'm.onnx', '--reference', '--save-outputs', 'out'], after=no_file('PLANTED'))]


@case
def injection_through_ir_text(d):
    """The same names read back from IR text (ampc's own format) stay names."""
    save(mlp(hostile_names()), d + '/m.onnx')
    return [Cmd(['m.onnx', '--emit', 'ir', '-o', 'm.ir']),
            Cmd(['m.ir', '--emit', 'c', '-o', 'm2.c'], after=no_plant('m2.c')),
            Cmd(['m.ir', '--emit', 'cuda', '-o', 'm2.cu'], after=no_plant('m2.cu'))]


@case
def hostile_op_domain_and_type(d):
    """An unsupported op whose domain and type are terminal escapes is refused; the message shows
    them escaped."""
    n = helper.make_node('Evil' + ESCAPES, ['x'], ['y'], name='n' + ESCAPES, domain='dom' + ESCAPES)
    m = mk([n], [vi('x', F, [2])], [vi('y', F, [2])])
    m.opset_import.append(helper.make_opsetid('dom' + ESCAPES, 1))
    save(m, d + '/m.onnx')
    return [Cmd(['inspect', 'm.onnx'], rc=(0, 1), want=['not supported']),
            Cmd(['m.onnx', '-o', 'libm.so'], rc=(1,), want=['m.onnx', 'not supported'])]


@case
def exporter_names_compile_and_run(d):
    """Names as exporters write them (`/blk.0/Relu`, `input.1`, `logits:0`) compile and run."""
    save(mlp(exporter_names()), d + '/m.onnx')
    npy(d + '/x.npy', np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8))
    return [Cmd(['m.onnx', '-o', 'libm.so']),
            Cmd(['inspect', 'libm.so'], want=['input.1', 'logits:0']),
            Cmd(['run', 'm.onnx', '--reference', '--input', 'input.1=x.npy', '--save-outputs', 'out'],
                after=files_in('out', 2))]


def small_model(d, name='m.onnx'):
    save(mk([helper.make_node('Relu', ['x'], ['y'], name='r')], [vi('x', F, [2, 3])], [vi('y', F, [2, 3])]),
         d + '/' + name)


@case
def output_is_the_model(d):
    """-o, --emit -o and --report naming the model itself are refused; the model is intact."""
    small_model(d)
    return [Cmd(['m.onnx', '-o', 'm.onnx'], rc=(1, 2), want=['m.onnx', 'same file']),
            Cmd(['m.onnx', '--emit', 'ir', '-o', 'm.onnx'], rc=(1, 2), want=['m.onnx', 'same file']),
            Cmd(['m.onnx', '-o', 'libm.so', '--report', 'm.onnx'], rc=(1, 2), want=['--report m.onnx', 'same file']),
            Cmd(['m.onnx', '-o', './m.onnx'], rc=(1, 2), want=['m.onnx', 'same file']),
            Cmd(['m.onnx', '-o', 'link.onnx'], rc=(1, 2), want=['link.onnx', 'same file'],
                setup=lambda d: os.symlink('m.onnx', d + '/link.onnx'))]


@case
def header_would_replace_the_ir_input(d):
    """`ampc m.h -o m.so` would write m.h, the IR-text input: refused."""
    small_model(d, 'src.onnx')
    return [Cmd(['src.onnx', '--emit', 'ir', '-o', 'm.h']),
            Cmd(['m.h', '-o', 'm.so'], rc=(1, 2), want=['header m.h', 'same file'])]


@case
def output_onto_special_files(d):
    """-o onto a FIFO or a folder is refused and the FIFO stays a FIFO."""
    small_model(d)
    os.mkfifo(d + '/fifo')
    os.mkdir(d + '/folder')
    return [Cmd(['m.onnx', '--emit', 'ir', '-o', 'fifo'], rc=(1, 2), want=['fifo is a FIFO']),
            Cmd(['m.onnx', '-o', 'fifo'], rc=(1, 2), want=['fifo is a FIFO']),
            Cmd(['m.onnx', '-o', 'folder'], rc=(1, 2), want=['folder is a folder']),
            Cmd(['m.onnx', '-o', 'libm.so', '--report', 'fifo'], rc=(1, 2), want=['--report fifo is a FIFO'])]


@case
def output_paths_that_cannot_be(d):
    """-o '' and -o into a missing folder: a message about the path, not the linker."""
    small_model(d)
    return [Cmd(['m.onnx', '-o', ''], rc=(1, 2), want=['-o is empty'], unwanted=['NULL']),
            Cmd(['m.onnx', '-o', 'no/such/dir/m.so'], rc=(1, 2), want=["folder 'no/such/dir' does not exist"],
                unwanted=['collect2', ' cc ', 'gcc'])]


@case
def outputs_whose_names_collide_as_files(d):
    """Outputs `a/b` and `a_b` saved by --save-outputs never share a file; `..` never escapes."""
    m = mk([helper.make_node('Relu', ['x'], ['a/b'], name='r'), helper.make_node('Neg', ['x'], ['a_b'], name='n'),
            helper.make_node('Abs', ['x'], ['../up'], name='a')],
           [vi('x', F, [3])], [vi('a/b', F, [3]), vi('a_b', F, [3]), vi('../up', F, [3])])
    save(m, d + '/m.onnx')
    return [Cmd(['run', 'm.onnx', '--reference', '--save-outputs', 'out'], want=["'a/b'", "'../up'"],
                after=all_of(files_in('out', 3), no_file('up.npy'), no_file('../up.npy')))]


@case
def calibration_names_stay_in_their_folder(d):
    """--calibrate DIR reads DIR/<input>.npy: an input named `../secret` reads nothing outside."""
    m = mk([helper.make_node('Relu', ['../secret'], ['y'], name='r')], [vi('../secret', F, [2, 3])],
           [vi('y', F, [2, 3])])
    save(m, d + '/m.onnx')
    os.mkdir(d + '/cal')
    npy(d + '/secret.npy', np.zeros((7, 7, 7), np.float32))  # read through `..`, its shape would show
    return [Cmd(['m.onnx', '--precision', 'auto', '--calibrate', 'cal', '--emit', 'ir', '-o', 'm.ir'], rc=(0, 1),
                unwanted=['7, 7, 7', '7x7x7', '[7,7,7]'])]


@case
def truncated_library(d):
    """A library cut short is refused by ampc run and ampc inspect, never a SIGBUS."""
    small_model(d)

    def cut(d):
        data = open(d + '/libm.so', 'rb').read()
        for k, n in enumerate([0, 3, 64, 1000, len(data) // 2, len(data) - 1]):
            open(d + '/cut%d.so' % k, 'wb').write(data[:n])
    cmds = [Cmd(['m.onnx', '-o', 'libm.so'], after=lambda d, out: cut(d))]
    for k in range(6):
        why = 'not an ELF file' if k < 2 else 'is truncated'
        cmds += [Cmd(['inspect', 'cut%d.so' % k], rc=(1, 2), want=['cut%d.so' % k, why]),
                 Cmd(['run', 'cut%d.so' % k], rc=(1, 2), want=['cut%d.so' % k, why])]
    return cmds


@case
def roi_align_with_absurd_rois(d):
    """RoiAlign with huge, infinite and NaN rois: defined results, no integer overflow."""
    n = helper.make_node('RoiAlign', ['x', 'rois', 'idx'], ['y'], name='roi', output_height=2, output_width=2,
                         sampling_ratio=2)
    m = mk([n], [vi('x', F, [1, 1, 4, 4]), vi('rois', F, [4, 4]), vi('idx', TensorProto.INT64, [4])],
           [vi('y', F, [4, 1, 2, 2])])
    save(m, d + '/m.onnx')
    npy(d + '/x.npy', np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    npy(d + '/rois.npy', np.array([[1e30, -1e30, 3e38, 1e20], [np.nan, 0, 1, 1], [np.inf, -np.inf, np.inf, np.nan],
                                   [-3e9, -3e9, 3e9, 3e9]], np.float32))
    npy(d + '/idx.npy', np.zeros(4, np.int64))
    return [Cmd(['run', 'm.onnx', '--reference', '--input', 'x=x.npy', '--input', 'rois=rois.npy',
                 '--input', 'idx=idx.npy'], rc=(0, 1))]


@case
def roi_align_sampling_ratio_that_never_ends(d):
    """RoiAlign with sampling_ratio = 2^31: refused, naming the node, instead of running forever."""
    n = helper.make_node('RoiAlign', ['x', 'rois', 'idx'], ['y'], name='roi', output_height=2, output_width=2,
                         sampling_ratio=2 ** 31 - 1)
    m = mk([n], [vi('x', F, [1, 1, 4, 4])], [vi('y', F, [1, 1, 2, 2])],
           [const('rois', np.array([[0, 0, 3, 3]], np.float32)), const('idx', np.zeros(1, np.int64))])
    save(m, d + '/m.onnx')
    return [Cmd(['run', 'm.onnx', '--reference'], rc=(1,), want=["RoiAlign 'roi'", 'sampling_ratio'])]


@case
def grid_sample_with_nan_and_inf_grids(d):
    """GridSample (bicubic, border and others) with NaN and infinite grids: no overflow."""
    cmds = []
    grid = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, np.nan, 0.5], np.float32).reshape(1, 2, 2, 2)
    npy(d + '/x.npy', np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    npy(d + '/grid.npy', grid)
    for mode in ['bicubic', 'linear', 'nearest']:
        for pad in ['border', 'zeros', 'reflection']:
            n = helper.make_node('GridSample', ['x', 'grid'], ['y'], name='gs', mode=mode, padding_mode=pad)
            save(mk([n], [vi('x', F, [1, 1, 4, 4]), vi('grid', F, [1, 2, 2, 2])], [vi('y', F, [1, 1, 2, 2])],
                    opset=20), '%s/%s_%s.onnx' % (d, mode, pad))
            cmds.append(Cmd(['run', '%s_%s.onnx' % (mode, pad), '--reference', '--input', 'x=x.npy',
                             '--input', 'grid=grid.npy'], rc=(0, 1)))
    return cmds


def loop_model(d, path, with_trip):
    body = helper.make_graph(
        [helper.make_node('Identity', ['cond_in'], ['cond_out'], name='keep'),
         helper.make_node('Add', ['acc_in', 'one'], ['acc_out'], name='inc')],
        'body', [vi('i', TensorProto.INT64, []), vi('cond_in', TensorProto.BOOL, []), vi('acc_in', F, [1])],
        [vi('cond_out', TensorProto.BOOL, []), vi('acc_out', F, [1])], [const('one', np.ones(1, np.float32))])
    inputs = [vi('M', TensorProto.INT64, []), vi('cond', TensorProto.BOOL, [])] if with_trip else \
        [vi('cond', TensorProto.BOOL, [])]
    n = helper.make_node('Loop', ['M' if with_trip else '', 'cond', 'acc0'], ['acc'], name='the_loop', body=body)
    save(mk([n], inputs, [vi('acc', F, [1])], [const('acc0', np.zeros(1, np.float32))]), d + '/' + path)


@case
def loops_that_would_not_end(d):
    """A Loop whose trip count (2^40) or condition (true forever) comes from a run-time input
    stops at the iteration limit with an error naming the node and the option that raises it."""
    loop_model(d, 'trip.onnx', True)
    loop_model(d, 'forever.onnx', False)
    npy(d + '/M.npy', np.array(2 ** 40, np.int64))
    npy(d + '/cond.npy', np.array(True))
    return [Cmd(['run', 'trip.onnx', '--reference', '--input', 'M=M.npy', '--input', 'cond=cond.npy'], rc=(1,),
                want=['the_loop', '--max-loop-iterations']),
            Cmd(['run', 'forever.onnx', '--reference', '--input', 'cond=cond.npy'], rc=(1,),
                want=['the_loop', '--max-loop-iterations']),
            Cmd(['run', 'forever.onnx', '--reference', '--input', 'cond=cond.npy', '--max-loop-iterations', '1000'],
                rc=(1,), want=['the_loop', '1000'])]


@case
def many_inputs_that_are_initializers(d):
    """2,000 graph inputs that are also initializers import and compile in linear time."""
    n_in = 2000
    names = ['in%d' % i for i in range(n_in)]
    nodes = [helper.make_node('Sum', names, ['y'], name='sum')]
    m = mk(nodes, [vi(n, F, [2]) for n in names], [vi('y', F, [2])],
           [const(n, np.full(2, i, np.float32)) for i, n in enumerate(names)])
    save(m, d + '/m.onnx')
    return [Cmd(['inspect', 'm.onnx']), Cmd(['m.onnx', '--emit', 'ir', '-o', 'm.ir']),
            Cmd(['run', 'm.onnx', '--reference'])]


def chain(d, n=200000):
    ops = ['Neg', 'Relu', 'Abs']
    nodes = [helper.make_node(ops[i % 3], ['v%d' % i], ['v%d' % (i + 1)], name='n%d' % i) for i in range(n)]
    save(mk(nodes, [vi('v0', F, [4])], [vi('v%d' % n, F, [4])]), d + '/m.onnx')


@case
def chain_of_200000_nodes(d):
    """A 200,000-node chain imports, is inspected and is evaluated in linear time."""
    chain(d)
    return [Cmd(['inspect', 'm.onnx']), Cmd(['run', 'm.onnx', '--reference'])]


@case
def chain_of_200000_nodes_compiles(d):
    """The same chain compiles to a library: its 12,500 fused kernels are three distinct ones."""
    chain(d)
    return [Cmd(['m.onnx', '-o', 'libm.so'], want=['libm.so'])]


@case
def declared_output_type_disagrees(d):
    """An output declared i64 and f32[5] that computes f32[2,3] is refused, naming it."""
    m = mk([helper.make_node('Relu', ['x'], ['y'], name='r')], [vi('x', F, [2, 3])], [vi('y', TensorProto.INT64, [2, 3])])
    save(m, d + '/dtype.onnx')
    m = mk([helper.make_node('Relu', ['x'], ['y'], name='r')], [vi('x', F, [2, 3])], [vi('y', F, [5])])
    save(m, d + '/shape.onnx')
    return [Cmd(['inspect', 'dtype.onnx'], rc=(1,), want=["graph output 'y' is declared i64[2,3]", 'f32[2,3]']),
            Cmd(['inspect', 'shape.onnx'], rc=(1,), want=["graph output 'y' is declared f32[5]", 'f32[2,3]'])]


def init_model(d, path, tensor):
    m = mk([helper.make_node('Identity', [tensor.name], ['y'], name='id')], [], [vi('y', tensor.data_type, list(tensor.dims))],
           [tensor])
    save(m, d + '/' + path)


@case
def initializer_encodings_that_lie(d):
    """int32_data out of range for u8/i8/f16, raw_data beside a typed field, dims that overflow:
    each refused naming the tensor; dims printed as given."""
    def int32_tensor(name, dtype, values):
        t = TensorProto(name=name, data_type=dtype, dims=[len(values)])
        t.int32_data.extend(values)
        return t
    init_model(d, 'u8.onnx', int32_tensor('u8w', TensorProto.UINT8, [1, 300, 2]))
    init_model(d, 'i8.onnx', int32_tensor('i8w', TensorProto.INT8, [-200, 5]))
    init_model(d, 'f16.onnx', int32_tensor('f16w', TensorProto.FLOAT16, [70000]))
    t = helper.make_tensor('both', F, [2], [1.0, 2.0])
    t.raw_data = np.array([3, 4], np.float32).tobytes()
    init_model(d, 'both.onnx', t)
    t = helper.make_tensor('huge', F, [1], [1.0])
    del t.dims[:]
    t.dims.extend([2 ** 40, 2 ** 40, 2 ** 40])
    m = mk([helper.make_node('Identity', ['huge'], ['y'], name='id')], [], [vi('y', F, None)], [t])
    save(m, d + '/huge.onnx')
    return [Cmd(['inspect', 'u8.onnx'], rc=(1,), want=["'u8w'", '300 is outside the range of u8']),
            Cmd(['inspect', 'i8.onnx'], rc=(1,), want=["'i8w'", '-200 is outside the range of i8']),
            Cmd(['inspect', 'f16.onnx'], rc=(1,), want=['f16w']),
            Cmd(['inspect', 'both.onnx'], rc=(1,), want=['both', 'raw_data']),
            Cmd(['inspect', 'huge.onnx'], rc=(1,), want=['huge', '1099511627776'])]


@case
def nan_attribute(d):
    """LeakyRelu with alpha = NaN: inspect, the reference and the GPU code agree (it compiles)."""
    m = mk([helper.make_node('LeakyRelu', ['x'], ['y'], name='lr', alpha=float('nan'))], [vi('x', F, [4])], [vi('y', F, [4])])
    save(m, d + '/m.onnx')
    return [Cmd(['inspect', 'm.onnx']), Cmd(['run', 'm.onnx', '--reference']),
            Cmd(['m.onnx', '--emit', 'ptx', '-o', 'm.ptx'])]


@case
def format_by_content(d):
    """An ONNX model named .bin and IR text named .onnx are read as what they are."""
    small_model(d, 'src.onnx')
    return [Cmd(['src.onnx', '--emit', 'ir', '-o', 'ir.onnx']),
            Cmd(['inspect', 'ir.onnx']),
            Cmd(['inspect', 'model.bin'], setup=lambda d: open(d + '/model.bin', 'wb').write(open(d + '/src.onnx', 'rb').read()))]


@case
def newcomer_traps(d):
    """--iterations with --reference is refused; --emit cuda of a library-only model says so; a
    successful -o says what it wrote; nothing is printed twice through a pipe."""
    m = mk([helper.make_node('MatMul', ['x', 'w'], ['y'], name='mm')], [vi('x', F, [64, 64])], [vi('y', F, [64, 64])],
           [const('w', np.ones((64, 64), np.float32))])
    save(m, d + '/mm.onnx')
    small_model(d)
    return [Cmd(['run', 'm.onnx', '--reference', '--iterations', '10'], rc=(2,), want=['--iterations']),
            Cmd(['run', 'm.onnx', '--reference', '--profile'], rc=(2,), want=['--profile']),
            Cmd(['mm.onnx', '--emit', 'cuda', '-o', 'mm.cu'], want=['no generated kernel'], after=nonempty('mm.cu')),
            Cmd(['m.onnx', '-o', 'libm.so'], want=['libm.so', 'libm.h'], after=no_repeated_lines)]


# ---- checks run after a command ---------------------------------------------------------------

def strip_c(src):
    """C/CUDA source without comments, string and character literals (line splices joined)."""
    src = src.replace('\\\n', '')
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            i = n if j < 0 else j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            i = n if j < 0 else j + 2
            out.append(' ')
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            i = j + 1
            out.append(c + c)
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def no_plant(path):
    def check(d, out):
        p = os.path.join(d, path)
        if not os.path.exists(p):
            return '%s was not written' % path
        code = strip_c(open(p, encoding='latin-1').read())
        for m in MARKERS:
            if m in code:
                k = code.index(m)
                return '%s: planted text %r outside comments and literals: ...%r...' % (path, m, code[max(0, k - 60):k + 40])
        return None
    return check


def json_ok(path):
    def check(d, out):
        import json
        try:
            json.load(open(os.path.join(d, path), encoding='utf-8'))
        except Exception as e:  # noqa: BLE001 -- any parse error is the finding
            return '%s is not valid JSON: %s' % (path, e)
        return None
    return check


def no_file(path):
    return lambda d, out: ('%s exists: planted code ran' % path) if os.path.lexists(os.path.join(d, path)) else None


def files_in(folder, n):
    def check(d, out):
        p = os.path.join(d, folder)
        got = sorted(os.listdir(p)) if os.path.isdir(p) else []
        return None if len(got) == n else '%s holds %d files, expected %d: %s' % (folder, len(got), n, got)
    return check


def nonempty(path):
    return lambda d, out: None if os.path.getsize(os.path.join(d, path)) > 0 else '%s is empty' % path


def no_repeated_lines(d, out):
    """No line printed twice (a buffer flushed in a parent and a forked child both)."""
    lines = [l for l in out.splitlines() if l.strip()]
    dup = [l for l in set(lines) if lines.count(l) > 1]
    return ('printed twice: %r' % dup[0]) if dup else None


def all_of(*checks):
    def check(d, out):
        for c in checks:
            r = c(d, out)
            if r:
                return r
        return None
    return check


# ---- the runner -------------------------------------------------------------------------------

def snapshot(d):
    """Every file of the case folder: its kind and, for regular files, a hash of its bytes."""
    snap = {}
    for root, dirs, files in os.walk(d):
        for f in dirs + files:
            p = os.path.join(root, f)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            h = hashlib.sha256(open(p, 'rb').read()).hexdigest() if stat.S_ISREG(st.st_mode) else ''
            snap[os.path.relpath(p, d)] = (kind, h)
    return snap


SANITIZER = re.compile(r'ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error: |SUMMARY: UndefinedBehavior')
RAW_CONTROL = re.compile(r'[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]')


def run_cmd(ampc, d, cmd, timeout):
    start = time.monotonic()
    try:
        p = subprocess.run([ampc] + cmd.args, cwd=d, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b'') + (e.stderr or b''), time.monotonic() - start
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def check_cmd(ampc, d, cmd, timeout, before, show=False):
    if cmd.setup:
        cmd.setup(d)
        before.update(snapshot(d))
    rc, raw, secs = run_cmd(ampc, d, cmd, timeout)
    out = raw.decode('utf-8', 'replace')
    line = 'ampc ' + ' '.join(repr(a) if (not a or ' ' in a) else a for a in cmd.args)
    if show:
        print('  $ %s  [exit %s]\n%s' % (line, rc, ''.join('    ' + l + '\n' for l in out.splitlines()[:12])))
    if rc is None:
        return '%s: still running when the case reached its time limit (%.1f s left for it)' % (line, timeout)
    if rc < 0:
        return '%s: killed by signal %s\n%s' % (line, signal.Signals(-rc).name, out[-2000:])
    if SANITIZER.search(out):
        return '%s: sanitizer report\n%s' % (line, out[-3000:])
    if rc not in cmd.rc:
        return '%s: exit %d, expected %s\n%s' % (line, rc, '/'.join(map(str, cmd.rc)), out[-2000:])
    for w in cmd.want:
        if w not in out:
            return '%s: output does not mention %r\n%s' % (line, w, out[-2000:])
    for w in cmd.unwanted:
        if w in out:
            return '%s: output mentions %r\n%s' % (line, w, out[-2000:])
    raw_bad = RAW_CONTROL.search(raw.decode('latin-1'))
    if raw_bad:
        k = raw_bad.start()
        return '%s: a raw control byte reached the terminal: %r' % (line, raw[max(0, k - 40):k + 20])
    if cmd.after:
        msg = cmd.after(d, out)
        if msg:
            return '%s: %s' % (line, msg)
    changed = [p for p, v in before.items() if snapshot_one(d, p) != v]
    if changed:
        return '%s: changed input files: %s' % (line, changed)
    return None


def snapshot_one(d, rel):
    p = os.path.join(d, rel)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    h = hashlib.sha256(open(p, 'rb').read()).hexdigest() if stat.S_ISREG(st.st_mode) else ''
    return (stat.S_IFMT(st.st_mode), h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ampc', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--timeout', type=float, default=30)
    ap.add_argument('-k', default='', help='only cases whose name contains this')
    ap.add_argument('--show', action='store_true', help="print each command's output")
    a = ap.parse_args()
    ampc = os.path.abspath(a.ampc)
    os.environ['AMPC_CACHE_DIR'] = os.path.join(os.path.abspath(a.work), 'cache')
    passed = failed = 0
    for fn in CASES:
        if a.k not in fn.__name__:
            continue
        d = os.path.join(os.path.abspath(a.work), fn.__name__)
        subprocess.run(['rm', '-rf', d], check=True)
        os.makedirs(d)
        cmds = fn(d)
        before = snapshot(d)
        problem = None
        start = time.monotonic()  # the case's time limit counts ampc's commands, not the setup
        for cmd in cmds:
            left = a.timeout - (time.monotonic() - start)
            problem = check_cmd(ampc, d, cmd, max(left, 0.1), before, a.show)
            if problem:
                break
            # What a command wrote is an input of the next.
            before = {**snapshot(d), **before}
        secs = time.monotonic() - start
        if problem:
            failed += 1
            print('FAIL %s (%.1f s): %s' % (fn.__name__, secs, problem), flush=True)
        else:
            passed += 1
            print('ok   %s (%d commands, %.1f s)' % (fn.__name__, len(cmds), secs), flush=True)
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
