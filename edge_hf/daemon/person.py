"""The person stage: each camera's newest frame through the pose model at its own rate, the pose
rules per camera, and what they say handed to the camera's detector.

A capture thread (or replay) offers every sampled frame to its camera's `PoseSlot`; the slot keeps
one, scaled for the pose model, once per `1 / rate_hz`. `PersonStage.step` takes the cameras'
new pose frames through the one pose session (one after another: the graph takes one frame a
run); each camera's `PoseVerdict`s are queued with their sample times (and its person boxes kept)
until the inference loop feeds them to the camera's detector, in time order with its windows.

Live, `step` runs in the stage's own thread (`start`), beside the inference loop: the pose model
and the classifier then use both cores at once instead of taking turns in one thread (`make
bench`'s capacity section measures both ways). Replay calls `step` itself before each window, so
a file gives the same events every run.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field

import numpy as np

from edge_hf.core.contract import PersonCropRule
from edge_hf.core.errors import UserError
from edge_hf.core.personcrop import BoxTrack, normalised
from edge_hf.core.pose import Person, PoseEstimator, pose_frame
from edge_hf.core.posefall import PoseFallRules, PoseRuleSettings, PoseVerdict
from edge_hf.core.posehead import PoseHead, file_sha256
from edge_hf.core.poseseq import PoseSequenceModel
from edge_hf.core.runtime import CPU, Providers
from edge_hf.core.secondlook import LookBudget, LookSettings, SecondLook, view_frame
from edge_hf.daemon.config import PersonConfig
from edge_hf.daemon.skeleton import PoseTick, figures

log = logging.getLogger(__name__)

MAX_ERRORS = 3  # a camera's consecutive pose failures before it is `degraded`
QUEUE = 64  # pose verdicts kept per camera for the inference loop (12.8 s at 5 Hz)
POSES_KEPT_S = 100.0  # each camera's people kept this long: skeleton snapshots and clips


def rule_settings(cfg: PersonConfig) -> PoseRuleSettings:
    """The pose rules' settings this config gives (the rest are the rules' defaults)."""
    return PoseRuleSettings(confirm_s=cfg.confirm_s, max_descent_s=cfg.max_descent_s)


def load_sequence(cfg: PersonConfig, providers: Providers = (CPU,)) -> PoseSequenceModel | None:
    """The pose-sequence model of `person.sequence` (None: unset), held to its contract: windows
    of the same pose model's keypoints at the same rate (at another rate its 4 s would be
    another span of time; another model's keypoints sit elsewhere on the body)."""
    if cfg.sequence is None:
        return None
    model = PoseSequenceModel(cfg.sequence, providers)
    c, where = model.contract, f"person.sequence: {cfg.sequence} reads"
    if abs(cfg.rate_hz - c.rate_hz) > 1e-6:
        raise UserError(
            f"{where} {c.ticks} poses at {c.rate_hz:g} Hz but person.rate_hz = {cfg.rate_hz:g}: "
            f"set person.rate_hz: {c.rate_hz:g} or leave person.sequence unset"
        )
    if cfg.model is not None:
        other = (
            file_sha256(cfg.model) != c.pose_model_sha256
            if c.pose_model_sha256
            else cfg.model.name != c.pose_model
        )
        if other:
            raise UserError(
                f"{where} the poses of {c.pose_model}; person.model {cfg.model} is another "
                "model: use that one, train a sequence model for this one "
                "(experiments/pose_seq.py) or leave person.sequence unset"
            )
    return model


def load_head(cfg: PersonConfig) -> PoseHead | None:
    """The learned pose head of `person.head` (None: unset), held to its contract: the pose
    model, rate, input side and rule settings it was fitted with must be this config's (its
    features mean something else otherwise, and it would veto or decide on them blindly). A
    head file saved before heads carried a contract is used with a warning."""
    if cfg.head is None:
        return None
    head = PoseHead.load(cfg.head)
    c = head.contract
    if c is None:
        log.warning(
            "person.head: %s does not say which pose model, rate, side and rule settings it was "
            "fitted with; used as it is (a head fitted by this version records them)", cfg.head,
        )  # fmt: skip
        return head
    where = f"person.head: {cfg.head} was fitted"
    if cfg.model is not None and file_sha256(cfg.model) != c.pose_model_sha256:
        raise UserError(
            f"{where} on the poses of {c.pose_model} (sha256 {c.pose_model_sha256[:12]}...); "
            f"person.model {cfg.model} is another model: use that one, fit a head for this one "
            "(experiments/pose_head.py) or leave person.head unset"
        )
    if abs(cfg.rate_hz - c.rate_hz) > 1e-6:
        raise UserError(
            f"{where} at {c.rate_hz:g} Hz but person.rate_hz = {cfg.rate_hz:g}: set "
            f"person.rate_hz: {c.rate_hz:g} or leave person.head unset"
        )
    if cfg.side != c.side:
        raise UserError(
            f"{where} at side {c.side} but person.side = {cfg.side}: set person.side: {c.side} "
            "or leave person.head unset"
        )
    ours_look = asdict(LookSettings()) if cfg.second_look else None
    if c.look != ours_look:
        raise UserError(
            f"{where} on poses {'without' if c.look is None else 'through'} the second look "
            f"{'' if c.look is None else json.dumps(c.look) + ' '}but person.second_look = "
            f"{str(cfg.second_look).lower()}: set person.second_look: "
            f"{str(c.look is not None).lower()} or leave person.head unset"
        )
    ours = asdict(rule_settings(cfg))
    for name in sorted(set(ours) | set(c.rules)):
        fitted, here = c.rules.get(name), ours.get(name)
        if fitted is not None and here is not None and abs(fitted - here) <= 1e-6:
            continue
        fix = (
            f"set person.{name}: {fitted:g}"
            if name in PersonConfig.model_fields and fitted is not None
            else "fit a head for these rules (experiments/pose_head.py)"
        )
        raise UserError(
            f"{where} with the pose rules' {name} = {fitted} but this config's is {here}: "
            f"{fix}, or leave person.head unset"
        )
    return head


class PoseSlot:
    """The newest frame for the pose model of one camera: written by its capture thread every
    `interval_s`, taken by the inference loop (a lock: one small frame a few times a second)."""

    def __init__(
        self,
        interval_s: float,
        side: int,
        wake: threading.Event | None = None,
        look: bool = False,
    ) -> None:
        self.interval_s, self.side, self.look = interval_s, side, look
        self.wake = wake  # set when a frame is kept (the person stage's thread waits on it)
        self._lock = threading.Lock()
        # (sample time, pose frame, the camera view a second look cuts from, or None)
        self._frame: tuple[float, np.ndarray, np.ndarray | None] | None = None
        self._next_t = float("-inf")

    def due(self, t: float) -> bool:
        """Whether a frame sampled at `t` is wanted (a pose tick has come)."""
        return t >= self._next_t - 1e-6

    def offer(
        self, t: float, frame_bgr: np.ndarray, crop: tuple[int, int, int, int] | None
    ) -> None:
        """Keep the frame sampled at `t` (BGR, camera resolution) if a pose tick has come."""
        if not self.due(t):
            return
        self._next_t = t + self.interval_s
        rgb = pose_frame(frame_bgr, crop, self.side)
        view = view_frame(frame_bgr, crop, self.side) if self.look else None
        with self._lock:
            self._frame = (t, rgb, view)
        if self.wake is not None:
            self.wake.set()

    def take(self) -> tuple[float, np.ndarray, np.ndarray | None] | None:
        """The newest frame not yet taken (its sample time, RGB, and with `look` the camera view
        at LOOK_ZOOM times the side, BGR: `view_frame`), or None."""
        with self._lock:
            got, self._frame = self._frame, None
        return got


@dataclass
class PersonCounters:
    """What the person stage did, for logs and stats."""

    frames: int = 0
    found: int = 0  # frames with at least one person
    looks: int = 0  # second-look runs of the pose model (person.second_look)
    busy_ms: float = 0.0
    falls: dict[str, int] = field(default_factory=dict)


class PersonStage:
    """One pose session for every camera, and each camera's pose rules.

    Each pose tick's verdict is queued per camera with its sample time; the inference loop takes
    those up to each window's newest sample (`verdicts_until`) and feeds them to the camera's
    detector before the window, so a verdict is never overwritten unseen and the order is the
    same live and in replay. A camera whose pose frames fail MAX_ERRORS times in a row is
    `degraded` (`degraded`): its classifier decides alone until a pose frame succeeds again;
    the other cameras are not touched."""

    def __init__(
        self, cfg: PersonConfig, providers: Providers, crop_rule: PersonCropRule | None = None
    ) -> None:
        if cfg.model is None:
            raise ValueError("the person stage needs person.model")
        self.cfg = cfg
        self.estimator = PoseEstimator(cfg.model, providers, side=cfg.side)
        self.settings = rule_settings(cfg)
        self.head = load_head(cfg)
        self.sequence = load_sequence(cfg, providers)
        self._rules: dict[str, PoseFallRules] = {}
        self._queues: dict[str, deque[PoseVerdict]] = {}
        self.counters = PersonCounters()
        # A person-crop model's windows are cut around each camera's recent person boxes.
        self.crop_rule = crop_rule
        self.tracks: dict[str, BoxTrack] = {}
        # Queues, tracks and counters are read by the inference loop while the stage's thread
        # writes them: one lock (held for bookkeeping only, never around the pose model).
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors: dict[str, int] = {}  # consecutive failures per camera
        self._looks: dict[str, SecondLook] = {}  # per camera, with person.second_look
        # Live (`start`), the squares get only the stage's spare time; replays run them all.
        self.look_budget: LookBudget | None = None
        self._turn = 0  # which camera's frame the stage's step takes first (`step`)
        self.degraded: dict[str, str] = {}  # camera -> why its pose stage is failing
        self._poses: dict[str, deque[PoseTick]] = {}  # the last POSES_KEPT_S, per camera

    @property
    def interval_s(self) -> float:
        return 1.0 / self.cfg.rate_hz

    def slot(self) -> PoseSlot:
        """A new camera's slot."""
        return PoseSlot(self.interval_s, self.cfg.side, self._wake, self.cfg.second_look)

    @property
    def threaded(self) -> bool:
        """Whether the stage runs in its own thread (live): the inference loop then never calls
        `step`."""
        return self._thread is not None

    def start(self, slots: dict[str, PoseSlot], stop: threading.Event) -> None:
        """Run `step` in the stage's own thread whenever a camera's slot has a new frame, until
        `stop` is set."""

        if self.cfg.second_look and self.look_budget is None:
            self.look_budget = LookBudget()

        def loop() -> None:
            while not stop.is_set():
                if not self._wake.wait(0.5):
                    continue
                self._wake.clear()
                try:
                    self.step(slots)
                except Exception:  # (step counts per camera; this would be a bug of its own)
                    log.exception("person stage: step failed; going on")

        self._thread = threading.Thread(target=loop, name="person-stage", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def step(self, slots: dict[str, PoseSlot]) -> None:
        """Run the pose model on every camera's new frame and queue that camera's verdict; a
        camera whose frame fails is counted against that camera alone."""
        taken = [(name, got) for name, slot in slots.items() if (got := slot.take()) is not None]
        # (in turn: the spare time saved up goes to the first camera's squares; live, cameras
        # take that place in turn)
        self._turn = (self._turn + 1) % max(len(taken), 1)
        taken = taken[self._turn :] + taken[: self._turn]
        for name, (t, frame, view) in taken:
            t0 = time.perf_counter()
            try:
                people = self.estimator.people_batch([frame])[0]
                if view is not None:
                    people = self._closer(name, t, people, frame, view, t0)
                with self._lock:
                    self.counters.busy_ms += (time.perf_counter() - t0) * 1000
                    self._update(name, t, frame.shape[:2], people)
            except Exception as exc:  # the pose model or head fails on this camera's frames
                self._failed(name, exc)

    def _closer(
        self,
        name: str,
        t: float,
        found: list[Person],
        frame: np.ndarray,
        view: np.ndarray,
        t0: float,
    ) -> list[Person]:
        """`found` on one camera's frame after its second look: every square when replaying,
        live (`look_budget`) only as many as the stage's spare time allows."""
        look = self._looks.get(name)
        if look is None:
            look = self._looks[name] = SecondLook(self.estimator)
        budget, limit = self.look_budget, None
        t1 = time.perf_counter()
        if budget is not None:
            budget.spent(t1 - t0)  # (the whole frame's run)
            limit = budget.squares(time.monotonic(), look.s.max_crops)
        crops = look.crops
        people = look.closer(t, found, frame, view, limit)
        if budget is not None:
            budget.spent(time.perf_counter() - t1, look.crops - crops)
        with self._lock:
            self.counters.looks += look.crops - crops
        return people

    def _failed(self, name: str, exc: Exception) -> None:
        with self._lock:
            n = self._errors[name] = self._errors.get(name, 0) + 1
            if n == MAX_ERRORS:
                self.degraded[name] = f"the pose model failed {n} times in a row ({exc})"
        if n < MAX_ERRORS:
            log.warning("%s: person stage: the pose model failed (%s), %d in a row", name, exc, n)
        elif n == MAX_ERRORS:
            log.error(
                "%s: person stage degraded: the pose model failed %d times in a row (%s); the "
                "classifier decides alone on this camera until a pose frame succeeds again",
                name, n, exc,
            )  # fmt: skip

    def _update(self, name: str, t: float, frame_hw: tuple[int, int], people: list[Person]) -> None:
        if self.crop_rule is not None:
            track = self.tracks.setdefault(name, BoxTrack(self.crop_rule, keep_s=60.0))
            track.add(t, normalised([p.box for p in people], frame_hw))
        rules = self._rules.get(name)
        if rules is None:
            rules = self._rules[name] = PoseFallRules(
                self.settings, head=self.head, seq=self.sequence, seq_mode=self.cfg.sequence_mode
            )
        verdict = rules.update(t, people)
        if self._errors.pop(name, 0) >= MAX_ERRORS:  # (counted as a success only now)
            self.degraded.pop(name, None)
            log.warning("%s: person stage working again", name)
        if verdict.person is not None:  # its box as 0-1 of the camera's view (what events say)
            who, (x0, y0, x1, y1) = verdict.person
            h, w = frame_hw
            verdict.person = (who, (x0 / w, y0 / h, x1 / w, y1 / h))
        verdict.seen = [s.scaled(frame_hw[1], frame_hw[0]) for s in verdict.seen]  # (the same)
        self.counters.frames += 1
        self.counters.found += bool(people)
        if verdict.new_fall:
            self.counters.falls[name] = self.counters.falls.get(name, 0) + 1
            log.info("%s: pose rules: fall (%s)", name, ", ".join(sorted(set(verdict.reasons))))
        poses = self._poses.setdefault(name, deque())
        poses.append(PoseTick(t, figures(people, frame_hw), frame_hw))
        while poses[0].t < t - POSES_KEPT_S:
            poses.popleft()
        queue = self._queues.setdefault(name, deque())
        queue.append(verdict)
        if len(queue) > QUEUE:  # the inference loop is far behind: drop the oldest, not a fall
            drop = next((v for v in queue if not v.new_fall), queue[0])
            queue.remove(drop)

    def boxes_for(self, camera: str, t: float) -> list[tuple[float, float, float, float]]:
        """The person boxes a window of `camera` whose newest sample is at `t` is cut around."""
        with self._lock:
            track = self.tracks.get(camera)
            return track.boxes_for(t) if track is not None else []

    def verdicts_until(self, camera: str, t: float) -> list[PoseVerdict]:
        """The camera's queued verdicts of pose ticks at or before sample time `t`, oldest first,
        each handed out once (later ones stay for the windows after `t`)."""
        with self._lock:
            queue = self._queues.get(camera)
            out: list[PoseVerdict] = []
            while queue and queue[0].t <= t + 1e-6:
                out.append(queue.popleft())
            return out

    def poses_between(self, camera: str, t0: float, t1: float) -> list[PoseTick]:
        """The camera's people of the pose ticks from sample time `t0` to `t1`, oldest first
        (kept for POSES_KEPT_S): what skeleton snapshots and clips draw."""
        with self._lock:
            return [p for p in self._poses.get(camera, ()) if t0 - 1e-6 <= p.t <= t1 + 1e-6]

    def is_degraded(self, camera: str) -> bool:
        with self._lock:
            return camera in self.degraded
