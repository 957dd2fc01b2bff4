"""Frame sources behind one small interface: video file, V4L2 device, RTSP/HTTP URL, GStreamer.

Each source opens with `open()`, hands out (frame, media time in seconds) with `read()`, and is
closed with `release()`. None of them is shared between threads: the capture thread owns its
source, so no decoder crosses a thread or a fork.

GStreamer examples (Jetson, JetPack's OpenCV):
- CSI camera: ``nvarguscamerasrc sensor-id=0 ! video/x-raw(memory:NVMM),width=1280,height=720,
  framerate=30/1 ! nvvidconv ! video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR
  ! appsink drop=true max-buffers=1``
- RTSP with hardware decoding: ``rtspsrc location=rtsp://cam/stream latency=200 ! rtph264depay
  ! h264parse ! nvv4l2decoder ! nvvidconv ! video/x-raw,format=BGRx ! videoconvert
  ! video/x-raw,format=BGR ! appsink drop=true max-buffers=1``
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import cv2
import numpy as np

from edge_hf.core.video import file_fps

log = logging.getLogger(__name__)


class SourceError(Exception):
    """A source that cannot be opened or stopped delivering frames."""


class Unreachable(SourceError):
    """The camera did not answer on the network: no other way of decoding it will help."""


class FrameSource(Protocol):
    """What the capture thread needs from a camera."""

    description: str
    live: bool  # True: read() blocks until the camera has a frame; False: a file

    def open(self) -> None: ...
    def grab(self) -> float | None:
        """Take the next frame; its media time (s), None at the end of a file or on failure."""
        ...

    def retrieve(self) -> np.ndarray | None:
        """The frame last grabbed, as BGR (None if it cannot be converted)."""
        ...

    def read(self) -> tuple[np.ndarray, float] | None:
        """The next BGR frame and its media time (s); None at the end of a file or on failure."""
        ...

    def release(self) -> None: ...


class OpenCVSource:
    """Anything OpenCV's VideoCapture reads: a file, a V4L2 device, a URL, a GStreamer string."""

    def __init__(
        self,
        target: str | int,
        backend: int = cv2.CAP_ANY,
        live: bool = True,
        realtime: bool = False,
        loop: bool = False,
        open_timeout_s: float = 10.0,
        read_timeout_s: float = 5.0,
        description: str | None = None,
        probe: str | None = None,
    ) -> None:
        self.target = target
        self.probe = probe  # a network camera's URL, checked before OpenCV opens it
        self.backend = backend
        self.live = live
        self.realtime = realtime and not live
        self.loop = loop and not live
        self.open_timeout_s = open_timeout_s
        self.read_timeout_s = read_timeout_s
        self.description = description or str(target)
        self._cap: cv2.VideoCapture | None = None
        self._fps = 0.0
        self._index = 0
        self.frame_count = 0
        self._offset_s = 0.0  # media time added per loop of a file
        self._t0 = 0.0

    def open(self) -> None:
        if not self.live and not Path(str(self.target)).is_file():
            raise SourceError(f"{self.description}: no such file")
        if self.probe:
            answers(self.probe, self.open_timeout_s, self.description)
        params: list[int] = []
        if self.backend in (cv2.CAP_FFMPEG, cv2.CAP_ANY) and isinstance(self.target, str):
            params = [
                cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, int(self.open_timeout_s * 1000),
                cv2.CAP_PROP_READ_TIMEOUT_MSEC, int(self.read_timeout_s * 1000),
            ]  # fmt: skip
        cap = cv2.VideoCapture(self.target, self.backend, params)
        if not cap.isOpened():
            cap.release()
            raise SourceError(f"cannot open {self.description}")
        self._cap = cap
        self._fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        self.frame_count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)  # a file's header says
        if not self.live:
            self._fps = file_fps(self._fps, self.description)
        self._index = 0
        self._offset_s = 0.0
        self._t0 = time.monotonic()

    def grab(self) -> float | None:
        """Decode the next frame without converting it; its media time (s), None at the end of
        a file or on failure. `retrieve` converts it to BGR, for the frames that are sampled."""
        if self._cap is None:
            raise SourceError(f"{self.description} is not open")
        ok = self._cap.grab()
        if not ok and self.loop and self._index > 0:
            self._offset_s += self._index / self._fps
            self._index = 0
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok = self._cap.grab()
        if not ok:
            return None
        if self.live:
            return time.monotonic() - self._t0
        media_t = self._offset_s + self._index / self._fps
        self._index += 1
        if self.realtime:  # pace a file like a camera
            delay = self._t0 + media_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        return media_t

    def retrieve(self) -> np.ndarray | None:
        """The last grabbed frame as BGR (the colour conversion half of a read)."""
        if self._cap is None:
            raise SourceError(f"{self.description} is not open")
        ok, frame = self._cap.retrieve()
        return frame if ok else None

    def read(self) -> tuple[np.ndarray, float] | None:
        t = self.grab()
        frame = self.retrieve() if t is not None else None
        return None if frame is None or t is None else (frame, t)

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def frames_decoded(self) -> int:
        """Frames read from a file so far (this loop)."""
        return self._index

    def release(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


_DEVICE = re.compile(r"^(/dev/video\d+|\d+)$")
_PORTS = {"rtsp": 554, "rtsps": 322, "http": 80, "https": 443, "rtmp": 1935}


def answers(url: str, timeout_s: float, description: str) -> None:
    """Raise Unreachable unless the camera at `url` answers within `timeout_s`: an RTSP server
    must reply to OPTIONS, any other TCP service must accept a connection (UDP is not checked).

    OpenCV opens every FFmpeg source under one process-wide lock, so a camera that accepts and
    never answers would hold up the opening of every other camera for its whole open timeout;
    this check waits on a plain socket instead, outside that lock.
    """
    parts = urlsplit(url)
    try:
        port = parts.port or _PORTS.get(parts.scheme)
    except ValueError:  # "rtsp://cam:55a/": a typo in the config, not a camera that is down
        raise Unreachable(
            f"cannot open {description}: the port in the URL is not a number"
        ) from None
    if not parts.hostname or port is None or parts.scheme == "udp":
        return
    where = f"{parts.hostname}:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s) as sock:
            if parts.scheme != "rtsp":
                return
            bare = parts._replace(netloc=where).geturl()  # no credentials on the wire here
            sock.sendall(f"OPTIONS {bare} RTSP/1.0\r\nCSeq: 1\r\n\r\n".encode())
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            reply = sock.recv(64)
    except TimeoutError:
        raise Unreachable(
            f"cannot open {description}: {where} did not answer within {timeout_s:g} s"
        ) from None
    except OSError as exc:
        raise Unreachable(f"cannot open {description}: {where}: {exc.strerror or exc}") from None
    if not reply.startswith(b"RTSP/"):
        raise Unreachable(f"cannot open {description}: {where} is not an RTSP server")


class FirstThatOpens:
    """The first of several ways to open one camera that works (hardware decoding, then
    software); a warning names the way that failed."""

    def __init__(self, sources: list[OpenCVSource]) -> None:
        self._sources = sources
        self._src = sources[0]
        self.live = sources[0].live
        self.description = sources[0].description

    def open(self) -> None:
        errors = []
        for i, src in enumerate(self._sources):
            try:
                src.open()
            except Unreachable:
                raise
            except SourceError as exc:
                errors.append(str(exc))
                if i + 1 < len(self._sources):
                    log.warning("%s; trying %s", exc, self._sources[i + 1].description)
                continue
            self._src, self.description = src, src.description
            return
        raise SourceError("; ".join(errors))

    def grab(self) -> float | None:
        return self._src.grab()

    def retrieve(self) -> np.ndarray | None:
        return self._src.retrieve()

    def read(self) -> tuple[np.ndarray, float] | None:
        return self._src.read()

    def release(self) -> None:
        self._src.release()


_HW_DECODER: bool | None = None


def opencv_has_gstreamer() -> bool:
    """Whether this OpenCV was built with GStreamer (JetPack's is; pip's opencv-python is not)."""
    return any(
        line.split(":")[0].strip() == "GStreamer" and "YES" in line
        for line in cv2.getBuildInformation().splitlines()
    )


def hardware_decoder() -> bool:
    """Whether RTSP can be decoded on a Jetson's NVDEC here: OpenCV built with GStreamer and
    GStreamer's `nvv4l2decoder` element installed (JetPack's nvidia-l4t-gstreamer)."""
    global _HW_DECODER
    if _HW_DECODER is None:
        inspect = shutil.which("gst-inspect-1.0")
        found = False
        if inspect and opencv_has_gstreamer():
            try:
                probe = [inspect, "--exists", "nvv4l2decoder"]
                found = subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
            except (OSError, subprocess.TimeoutExpired):  # a broken plugin cache: say no
                found = False
        _HW_DECODER = found
    return _HW_DECODER


def hardware_rtsp_pipeline(url: str, latency_ms: int = 200) -> str:
    """A GStreamer pipeline that decodes `url` (H.264 or H.265) on NVDEC and hands BGR frames
    to OpenCV, dropping all but the newest."""
    return (
        f'rtspsrc location="{url}" latency={latency_ms} protocols=tcp ! decodebin ! nvvidconv '
        "! video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR "
        "! appsink drop=true max-buffers=1 sync=false"
    )


def make_source(
    source: str,
    realtime: bool = True,
    loop: bool = False,
    open_timeout_s: float = 10.0,
    read_timeout_s: float = 5.0,
    decoder: str = "auto",
) -> OpenCVSource | FirstThatOpens:
    """Pick the backend from the source string: device, URL, GStreamer pipeline, or file.

    An rtsp:// camera decodes on the hardware decoder when `decoder` is "hardware", or "auto"
    and `hardware_decoder()` says it is there (falling back to FFmpeg if that pipeline does not
    open); else in software through FFmpeg.
    """
    if _DEVICE.match(source):
        target: str | int = int(source) if source.isdigit() else source
        return OpenCVSource(target, cv2.CAP_V4L2, live=True, description=f"V4L2 {source}")
    if re.match(r"^(rtsp|rtsps|http|https|rtmp|udp|tcp)://", source):
        software = OpenCVSource(
            source, cv2.CAP_FFMPEG, live=True, open_timeout_s=open_timeout_s,
            read_timeout_s=read_timeout_s, description=redact(source), probe=source,
        )  # fmt: skip
        rtsp = source.startswith(("rtsp://", "rtsps://"))
        if not rtsp or decoder == "software" or (decoder == "auto" and not hardware_decoder()):
            return software
        hardware = OpenCVSource(
            hardware_rtsp_pipeline(source), cv2.CAP_GSTREAMER, live=True,
            open_timeout_s=open_timeout_s, description=f"{redact(source)} (hardware decoder)",
            probe=source,
        )  # fmt: skip
        return hardware if decoder == "hardware" else FirstThatOpens([hardware, software])
    if "appsink" in source or " ! " in source:
        return OpenCVSource(source, cv2.CAP_GSTREAMER, live=True, description="GStreamer pipeline")
    path = Path(source)
    return OpenCVSource(
        str(path), cv2.CAP_FFMPEG, live=False, realtime=realtime, loop=loop, description=str(path)
    )


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")  # also one inside a GStreamer string
# To the URL's *last* '@': a password may hold '@' or '/' ("p@ss/1"; more is masked if a later
# part holds one, never less).
_PASSWORD = re.compile(r"//([^:/@]*):.*@")
_PARAM = re.compile(r"([^=&;]*)=[^&;]*")
_PATH_PARAM = re.compile(r";([^=;/]*)=[^;/]*")


def redact(text: str) -> str:
    """`text` with every URL in it masked, for logs, errors and `doctor`: the password of its
    user info and the value of every query and fragment parameter (`?token=`, `jwt=`,
    `#access_token=`: a secret's name cannot be guessed, so none is shown); a bare fragment too."""
    return _URL.sub(lambda m: _mask_url(m.group()), text)


def _mask_url(url: str) -> str:
    url = _PASSWORD.sub(r"//\1:***@", url, count=1)
    base, hash_, fragment = url.partition("#")
    base, mark, query = base.partition("?")
    base = _PATH_PARAM.sub(r";\1=***", base)  # rtsp://cam/live;auth=...
    if mark:
        base += "?" + _PARAM.sub(r"\1=***", query)
    if hash_:  # never sent to the camera: nothing in it helps to find one
        base += "#" + (_PARAM.sub(r"\1=***", fragment) if "=" in fragment else "***")
    return base
