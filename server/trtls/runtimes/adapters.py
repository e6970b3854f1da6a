"""The Python runtime adapters, instantiated only inside the runtime's child process: ONNX Runtime, the
ONNX reference evaluator, and TensorRT 10 with cuda-python device buffers.

Each adapter loads its model, states the model's input `Signature` (for `validate_feed`) and hands out one
runner per thread. Separate because these are the only code that touches the heavy optional libraries
(onnxruntime, onnx, TensorRT, cuda-python); they import them in `__init__`, so the parent never loads them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from trtls.fs import read_bytes
from trtls.fs.models import load_onnx, require_regular
from trtls.runtimes.contract import RuntimeSpec, Signature


def no_nvidia_gpu() -> bool:
    """No NVIDIA driver on this host (neither its /proc entry nor nvidia-smi): no engine can run here, whatever
    Python packages are installed."""
    import shutil

    return not Path("/proc/driver/nvidia/version").exists() and shutil.which("nvidia-smi") is None


class Unavailable(Exception):
    """The runtime cannot run here (no TensorRT, no cuda-python, no GPU, engine refused by this device)."""


class _Adapter:
    signature: Signature

    def runner(self) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:  # one per thread
        raise NotImplementedError

    def close(self) -> None:
        pass

    gpu_mem_bytes: int | None = None


_ONNX_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


class _OrtAdapter(_Adapter):
    def __init__(self, spec: RuntimeSpec):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = spec.threads
        opts.inter_op_num_threads = spec.inter_threads
        opts.graph_optimization_level = {
            "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[spec.graph_optimization]
        opts.log_severity_level = 3
        available = ort.get_available_providers()
        if spec.provider not in available:  # ONNX Runtime would fall back to another provider without a word
            raise Unavailable(
                f"ONNX Runtime {ort.__version__} here has no {spec.provider} (it has {', '.join(available)})"
            )
        assert spec.model is not None  # RuntimeSpec.problems() refuses a model runtime without one
        try:
            require_regular(spec.model)  # ONNX Runtime opens the path itself (external data beside it)
        except OSError as exc:
            raise Unavailable(f"the model {spec.model} cannot be read: {exc.strerror or exc}") from None
        self.sess = ort.InferenceSession(spec.model, sess_options=opts, providers=[spec.provider])
        self.signature = {}
        for i in self.sess.get_inputs():
            shape = (
                tuple(d if isinstance(d, int) and d >= 0 else None for d in i.shape) if i.shape is not None else None
            )
            if i.type not in _ONNX_DTYPES:
                raise RuntimeError(f"input {i.name!r} has unsupported type {i.type}")
            self.signature[i.name] = (shape, np.dtype(_ONNX_DTYPES[i.type]))
        self.output_names = [o.name for o in self.sess.get_outputs()]

    def runner(self):
        def run(feed):
            return dict(zip(self.output_names, self.sess.run(self.output_names, feed), strict=True))

        return run


class _ReferenceAdapter(_Adapter):
    def __init__(self, spec: RuntimeSpec):
        from onnx import helper
        from onnx.reference import ReferenceEvaluator  # noqa: F401 - fail here, not per request, when it is missing

        assert spec.model is not None  # RuntimeSpec.problems() refuses a model runtime without one
        model = load_onnx(spec.model)
        initializers = {t.name for t in model.graph.initializer}
        self.signature = {}
        for vi in model.graph.input:
            if vi.name in initializers:
                continue
            tt = vi.type.tensor_type
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
            shape = (
                tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
                if tt.HasField("shape")
                else None
            )
            self.signature[vi.name] = (shape, dtype)
        self.model = model

    def runner(self):
        from onnx.reference import ReferenceEvaluator

        ev = ReferenceEvaluator(self.model)  # one per thread: the evaluator is not documented thread-safe

        def run(feed):
            outs = ev.run(None, feed)
            return {name: np.asarray(v) for name, v in zip(ev.output_names, outs, strict=True)}

        return run


def _cuda_check(cudart: Any, result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:  # cudaSuccess
        raise RuntimeError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else tuple(rest)


class _TensorRTAdapter(_Adapter):
    """TensorRT 10 execution: deserialize, one execution context per thread, `execute_async_v3` on a stream.

    Cannot run on this project's CI (no CUDA driver); every missing piece becomes `Unavailable(reason)`.
    """

    def __init__(self, spec: RuntimeSpec):
        engine_path = Path(spec.model or "")
        if not engine_path.is_file():
            raise FileNotFoundError(f"engine not found: {engine_path}")
        from trtls.builds.worker.adapter import (  # the one module that imports TensorRT
            BuilderUnavailable,
            load_builder_module,
        )

        try:
            trt = load_builder_module("auto").trt
        except BuilderUnavailable as exc:
            raise Unavailable(str(exc)) from None
        if no_nvidia_gpu():  # said first: advice to install cuda-python would not help a host with no GPU
            raise Unavailable("no NVIDIA GPU or driver on this machine: a TensorRT engine needs one to run")
        try:
            from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
        except ImportError:
            try:
                from cuda import cudart  # older cuda-python
            except ImportError:
                raise Unavailable(
                    "cuda-python is not installed (pip install 'trtls[gpu]'); device buffers need it"
                ) from None
        try:
            count = _cuda_check(cudart, cudart.cudaGetDeviceCount(), "cudaGetDeviceCount")
        except RuntimeError as exc:
            raise Unavailable(f"no usable CUDA device ({exc})") from None
        if not count:
            raise Unavailable("no CUDA device found")
        self.trt, self.cudart = trt, cudart
        free0, total = _cuda_check(cudart, cudart.cudaMemGetInfo(), "cudaMemGetInfo")
        self._used0 = total - free0
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(read_bytes(engine_path, limit=None, follow=True))
        if self.engine is None:
            raise Unavailable(
                f"TensorRT {getattr(trt, '__version__', '?')} refused the engine on this device (built for another "
                "GPU, TensorRT version or hardware-compatibility level)"
            )
        self.names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.inputs = [n for n in self.names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in self.names if n not in self.inputs]
        self.signature = {}
        for n in self.inputs:
            shape = tuple(d if d >= 0 else None for d in self.engine.get_tensor_shape(n))
            self.signature[n] = (shape, np.dtype(trt.nptype(self.engine.get_tensor_dtype(n))))
        self._lock = threading.Lock()
        self.gpu_mem_bytes = 0

    def _note_memory(self) -> None:
        free, total = _cuda_check(self.cudart, self.cudart.cudaMemGetInfo(), "cudaMemGetInfo")
        with self._lock:
            self.gpu_mem_bytes = max(self.gpu_mem_bytes or 0, total - free - self._used0)

    def runner(self):
        trt, cudart = self.trt, self.cudart
        context = self.engine.create_execution_context()  # contexts are not thread-safe: one per thread
        stream = _cuda_check(cudart, cudart.cudaStreamCreate(), "cudaStreamCreate")
        h2d = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        d2h = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost

        def run(feed):
            buffers = []
            try:
                host_in = {}
                for n in self.inputs:
                    arr = np.ascontiguousarray(feed[n])
                    host_in[n] = arr
                    if not context.set_input_shape(n, tuple(arr.shape)):
                        raise RuntimeError(
                            f"TensorRT refused shape {arr.shape} for input {n!r} (outside the optimization profile)"
                        )
                    ptr = _cuda_check(cudart, cudart.cudaMalloc(max(1, arr.nbytes)), "cudaMalloc")
                    buffers.append(ptr)
                    _cuda_check(
                        cudart,
                        cudart.cudaMemcpyAsync(ptr, arr.ctypes.data, arr.nbytes, h2d, stream),
                        "cudaMemcpyAsync H2D",
                    )
                    context.set_tensor_address(n, int(ptr))
                host_out = {}
                for n in self.outputs:
                    shape = tuple(context.get_tensor_shape(n))
                    arr = np.empty(shape, dtype=trt.nptype(self.engine.get_tensor_dtype(n)))
                    ptr = _cuda_check(cudart, cudart.cudaMalloc(max(1, arr.nbytes)), "cudaMalloc")
                    buffers.append(ptr)
                    context.set_tensor_address(n, int(ptr))
                    host_out[n] = (arr, ptr)
                if not context.execute_async_v3(stream):
                    raise RuntimeError("execute_async_v3 failed (see TensorRT log on stderr)")
                for arr, ptr in host_out.values():
                    _cuda_check(
                        cudart,
                        cudart.cudaMemcpyAsync(arr.ctypes.data, ptr, arr.nbytes, d2h, stream),
                        "cudaMemcpyAsync D2H",
                    )
                _cuda_check(cudart, cudart.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
                self._note_memory()
                return {n: arr for n, (arr, _) in host_out.items()}
            finally:
                for ptr in buffers:
                    cudart.cudaFree(ptr)

        return run


_ADAPTERS: dict[str, Callable[[RuntimeSpec], _Adapter]] = {
    "onnxruntime": _OrtAdapter,
    "onnx_reference": _ReferenceAdapter,
    "tensorrt": _TensorRTAdapter,
}
