"""The ONNX Runtime classifier: providers from config, the ones really in use checked and logged.

ONNX Runtime falls back to the CPU silently when a GPU provider cannot load; we compare what was
asked for with `session.get_providers()` and say so. TensorRT builds fp16 engines cached under
`state_dir/trt-cache`; with input already on CUDA the session reads it in place (IO binding).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from edge_hf.core.contract import INPUT_NAME, OUTPUT_NAME, ModelContract, read_metadata
from edge_hf.core.errors import UserError
from edge_hf.core.runtime import contract_of, open_session
from edge_hf.daemon.config import StateFiles

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

ORT_NAMES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}


def _provider_list(
    wanted: Sequence[str],
    available: Sequence[str],
    cache_dir: Path,
    fp16: bool,
    contract: ModelContract,
    max_batch: int,
) -> list[tuple[str, dict[str, str]]]:
    h, w = contract.input_size
    shape = f"{3 * contract.window * contract.volumes}x{h}x{w}"
    out: list[tuple[str, dict[str, str]]] = []
    for name in wanted:
        ort_name = ORT_NAMES[name]
        if ort_name not in available:
            log.warning(
                "provider %s is not in this onnxruntime build (%s); skipped",
                name,
                ", ".join(available),
            )
            continue
        if name == "tensorrt":
            cache_dir.mkdir(parents=True, exist_ok=True)
            opts = {
                "trt_fp16_enable": "True" if fp16 else "False",
                "trt_engine_cache_enable": "True",
                "trt_engine_cache_path": str(cache_dir),
                "trt_timing_cache_enable": "True",
                "trt_profile_min_shapes": f"{INPUT_NAME}:1x{shape}",
                "trt_profile_opt_shapes": f"{INPUT_NAME}:{max_batch}x{shape}",
                "trt_profile_max_shapes": f"{INPUT_NAME}:{max_batch}x{shape}",
            }
            out.append((ort_name, opts))
        else:
            out.append((ort_name, {}))
    if not out:
        out.append((ORT_NAMES["cpu"], {}))
    return out


class OnnxFallClassifier:
    """Runs an edge_hf ONNX model on batches of hyperframes; returns per-window fall probability."""

    def __init__(
        self,
        path: Path,
        providers: Sequence[str] = ("cpu",),
        state_dir: Path | None = None,
        fp16: bool = True,
        max_batch: int = 16,
        threads: int = 0,
        on_slow_start: Callable[[], object] | None = None,
    ) -> None:
        import onnxruntime as ort

        # The metadata alone (no graph load) sizes TensorRT's profiles; the file is then loaded
        # once, by the session, and the contract re-read from it and checked against the graph.
        if not path.is_file():
            raise UserError(f"model.path: {path} does not exist (see models/ for shipped models)")
        try:
            first = ModelContract.from_metadata(read_metadata(path), str(path))
        except ValueError as exc:
            raise UserError(f"model.path: {exc}") from None
        self.path = path
        requested = _provider_list(
            providers,
            ort.get_available_providers(),
            (state_dir or Path(".")) / StateFiles.TRT_CACHE,
            fp16,
            first,
            max_batch,
        )
        if on_slow_start is not None and requested[0][0] == ORT_NAMES["tensorrt"]:
            on_slow_start()  # a TensorRT engine build can take minutes: tell systemd to wait
        self.session = open_session(path, requested, threads)
        self.contract = contract_of(self.session, path)
        classes = list(self.contract.classes)
        self.fall_index = classes.index(self.contract.fall_class)
        down = self.contract.down_class
        self.down_index = classes.index(down) if down else None
        self.providers = list(self.session.get_providers())
        if self.providers[0] != requested[0][0]:
            log.warning(
                "asked for %s but ONNX Runtime runs on %s (fell back)",
                requested[0][0],
                self.providers[0],
            )
        note = self.contract.members_note
        log.info("model %s%s on %s", path.name, note, ", ".join(self.providers))
        self.on_cuda = self.providers[0] in (ORT_NAMES["tensorrt"], ORT_NAMES["cuda"])
        # The window stage runs where the model does: torch on CUDA (torch.cat + in-place
        # normalisation on the GPU, IO binding), NumPy on the CPU, where torch is never loaded.
        self.device = "cpu"
        if self.on_cuda:
            import torch

            self.device = "cuda" if torch.cuda.is_available() else "cpu"

    @property
    def input_shape(self) -> tuple[int, int, int]:
        c = self.contract
        return 3 * c.window * c.volumes, c.input_size[0], c.input_size[1]

    def warm_up(self, runs: int = 3) -> float:
        """Run a few dummy batches (first runs allocate and, on TensorRT, build); return last ms."""
        x: Any = np.zeros((1, *self.input_shape), np.float32)
        if self.device == "cuda":
            import torch

            x = torch.from_numpy(x).to(self.device)
        ms = 0.0
        for _ in range(runs):
            t0 = time.perf_counter()
            self.logits(x)
            ms = (time.perf_counter() - t0) * 1000
        return ms

    def logits(self, batch: np.ndarray | torch.Tensor) -> np.ndarray:
        """(N, C) logits for an (N, 3T, H, W) float32 batch: a NumPy array, or a torch tensor
        on CPU or CUDA."""
        if isinstance(batch, np.ndarray):
            return np.asarray(self.session.run([OUTPUT_NAME], {INPUT_NAME: batch})[0])
        if batch.device.type == "cuda":
            binding = self.session.io_binding()
            batch = batch.contiguous()
            binding.bind_input(
                INPUT_NAME,
                "cuda",
                batch.device.index or 0,
                np.float32,
                tuple(batch.shape),
                batch.data_ptr(),
            )
            binding.bind_output(OUTPUT_NAME, "cpu")
            self.session.run_with_iobinding(binding)
            return np.asarray(binding.copy_outputs_to_cpu()[0])
        return np.asarray(self.session.run([OUTPUT_NAME], {INPUT_NAME: batch.numpy()})[0])

    def probabilities(self, batch: np.ndarray | torch.Tensor) -> np.ndarray:
        """(N, C) softmax probabilities, in the order of the contract's classes."""
        z = self.logits(batch).astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        return p

    def fall_scores(self, batch: np.ndarray | torch.Tensor) -> np.ndarray:
        """Softmax probability of the fall class for each window in the batch."""
        return self.probabilities(batch)[:, self.fall_index]

    def scores(self, batch: np.ndarray | torch.Tensor) -> list[WindowScores]:
        """Each window's named probabilities: what the detector decides on."""
        probs = self.probabilities(batch)
        fall, down = self.fall_index, self.down_index
        return [
            WindowScores(float(p[fall]), None if down is None else float(p[down])) for p in probs
        ]


class WindowScores(NamedTuple):
    """A window's probability of a fall (the model's fall class, or `falling`) and, for a model
    that has one, of a person down after a fall."""

    fall: float
    down: float | None


class Classifier(Protocol):
    """What the pipeline needs from a model: its contract, where it runs, and named scores."""

    contract: ModelContract
    providers: list[str]
    device: str

    def warm_up(self, runs: int = 3) -> float: ...

    def scores(self, batch: np.ndarray | torch.Tensor) -> list[WindowScores]: ...
