"""Zones: polygons in a camera's picture that say where lying down is a fall and where it is not.

A zone is a polygon in 0-1 coordinates of the camera's view (x from the left, y from the top; the
`crop` when the camera has one, else the whole frame), so a resolution change keeps it. `ignore`
zones (a bed, a sofa): a person lying inside one raises no fall. `floor` zones: where there are
any, only a person lying inside one counts. Where a person lies is their hips (the midpoint of the
hips the pose model saw), else their box's centre. Pure geometry and drawing; the detector
(`edge_hf.daemon.events.FallDetector`) applies it to the people the pose rules saw down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from edge_hf.core.pose import HIPS, MIN_KEYPOINT_SCORE, Person

Point = tuple[float, float]
KINDS = ("ignore", "floor")
MIN_AREA = 1e-4  # of the picture: a polygon smaller than this (or flat) is a typo


@dataclass(frozen=True)
class Zone:
    """One named polygon (0-1 of the camera's view) of kind `ignore` or `floor`."""

    name: str
    kind: str
    points: tuple[Point, ...]

    def contains(self, p: Point) -> bool:
        return inside(p, self.points)


def body_point(person: Person) -> Point:
    """Where a person lies, for zones: the midpoint of the hips seen, else the box's centre (the
    same pixels as the person)."""
    kp = person.keypoints
    hips = [kp[i] for i in HIPS if kp[i, 2] >= MIN_KEYPOINT_SCORE]
    if hips:
        return (float(np.mean([h[0] for h in hips])), float(np.mean([h[1] for h in hips])))
    x0, y0, x1, y1 = person.box
    return ((x0 + x1) / 2, (y0 + y1) / 2)


def inside(p: Point, polygon: Sequence[Point]) -> bool:
    """Whether point `p` is inside `polygon` (even-odd rule; a point on an edge may go either
    way)."""
    x, y = p
    hit = False
    n = len(polygon)
    for i in range(n):
        (x0, y0), (x1, y1) = polygon[i], polygon[(i + 1) % n]
        if (y0 > y) != (y1 > y) and x < x0 + (y - y0) * (x1 - x0) / (y1 - y0):
            hit = not hit
    return hit


def area(polygon: Sequence[Point]) -> float:
    """The polygon's area (shoelace formula; positive whatever its winding)."""
    n = len(polygon)
    twice = sum(
        polygon[i][0] * polygon[(i + 1) % n][1] - polygon[(i + 1) % n][0] * polygon[i][1]
        for i in range(n)
    )
    return abs(twice) / 2


def _crosses(a: Point, b: Point, c: Point, d: Point) -> bool:
    """Whether segments ab and cd cross at a point inside both (touching ends do not count)."""

    def side(p: Point, q: Point, r: Point) -> float:
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    d1, d2 = side(c, d, a), side(c, d, b)
    d3, d4 = side(a, b, c), side(a, b, d)
    return d1 * d2 < 0 and d3 * d4 < 0


def polygon_problem(points: Sequence[Point]) -> str | None:
    """What is wrong with a zone's points (None: nothing): fewer than 3, a point outside the
    picture, no area, or edges that cross (a bow tie has no clear inside)."""
    if len(points) < 3:
        return f"{len(points)} points; a zone needs at least 3 [x, y] corners"
    for i, (x, y) in enumerate(points):
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
            return (
                f"point {i} [{x:g}, {y:g}] is outside the picture: x and y are fractions 0-1 of "
                "the camera's view (x from the left, y from the top), not pixels"
            )
    if area(points) < MIN_AREA:
        return "the points enclose no area (all on one line, or a speck): give the corners"
    n = len(points)
    for i in range(n):
        for j in range(i + 2, n):
            if i == 0 and j == n - 1:
                continue  # (neighbours through the closing edge)
            if _crosses(points[i], points[(i + 1) % n], points[j], points[(j + 1) % n]):
                return (
                    f"edges {i}-{i + 1} and {j}-{(j + 1) % n} cross; list the corners in order "
                    "around the zone"
                )
    return None


@dataclass(frozen=True)
class Zones:
    """A camera's zones, and the one rule of what lying at a point means."""

    zones: tuple[Zone, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.zones)

    def refusal(self, p: Point) -> str | None:
        """Why lying at `p` (0-1 of the view) raises no fall: "zone <name>" (inside an `ignore`
        zone), "outside the floor zones" (there are `floor` zones and `p` is in none); None: it
        counts."""
        for z in self.zones:
            if z.kind == "ignore" and z.contains(p):
                return f"zone {z.name}"
        floors = [z for z in self.zones if z.kind == "floor"]
        if floors and not any(z.contains(p) for z in floors):
            return "outside the floor zones"
        return None

    def named(self, p: Point) -> str | None:
        """The name of the first `floor` zone that holds `p` (what an event says), or None."""
        return next((z.name for z in self.zones if z.kind == "floor" and z.contains(p)), None)


COLOURS = {"ignore": (40, 40, 230), "floor": (60, 200, 60)}  # BGR: red where falls are ignored


def draw(view_bgr: np.ndarray, zones: Zones, alpha: float = 0.35) -> np.ndarray:
    """A copy of the camera's view (BGR) with each zone filled (`ignore` red over `floor`
    green: an ignore zone wins), outlined and named at its top-left corner, and ticks every 0.1
    along the edges to read coordinates off."""
    out = view_bgr.copy()
    h, w = out.shape[:2]
    ordered = sorted(zones.zones, key=lambda z: z.kind != "floor")  # floors first, under
    polys = [
        np.array([[round(x * (w - 1)), round(y * (h - 1))] for x, y in z.points], np.int32)
        for z in ordered
    ]
    for z, pts in zip(ordered, polys, strict=True):
        tint = out.copy()
        cv2.fillPoly(tint, [pts], COLOURS[z.kind])
        out = cv2.addWeighted(tint, alpha, out, 1 - alpha, 0)
    line = max(1, round(max(h, w) / 400))
    scale = max(0.4, max(h, w) / 1400)
    for z, pts in zip(ordered, polys, strict=True):
        cv2.polylines(out, [pts], True, COLOURS[z.kind], line, cv2.LINE_AA)
        label = f"{z.name} ({z.kind})"
        (_, th), _ = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        org = (int(pts[:, 0].min()) + 2 * line + 2, int(pts[:, 1].min()) + th + 2 * line + 2)
        for colour, thick in (((0, 0, 0), 3), ((255, 255, 255), 1)):
            cv2.putText(out, label, org, cv2.FONT_HERSHEY_SIMPLEX, scale, colour, thick,
                        cv2.LINE_AA)  # fmt: skip
    tick = max(4, round(min(h, w) / 60))
    for k in range(1, 10):
        x, y = round(k / 10 * (w - 1)), round(k / 10 * (h - 1))
        for a, b in (((x, 0), (x, tick)), ((x, h - 1), (x, h - 1 - tick)),
                     ((0, y), (tick, y)), ((w - 1, y), (w - 1 - tick, y))):  # fmt: skip
            cv2.line(out, a, b, (255, 255, 255), 1)
    return out
