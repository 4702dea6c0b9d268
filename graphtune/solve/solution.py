"""What a solver returns: :class:`Solution` (public) and :class:`Outcome` (per-method result).

Examples
--------
>>> s = Solution({"a": 0}, energy=2.0, lower_bound=1.5, optimal=False, method="cpsat", seconds=0.1)
>>> s.gap
0.5
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Solution", "Outcome"]


@dataclass
class Solution:
    """The chosen candidate per node and how good it provably is.

    Parameters
    ----------
    assignment : dict
        Node name -> candidate index.
    energy : float
        Total ms of the assignment, re-evaluated in floats by ``graph.energy``.
    lower_bound : float
        Proven lower bound on the optimum (``<= energy``).
    optimal : bool
        True only when the assignment is proven optimal (``energy == lower_bound``
        up to float rounding).
    method : str
        Method that produced it (``auto`` reports the parts in ``stats``).
    seconds : float
        Wall time of the solve.
    stats : dict
        Method details: treewidth, reductions, RN steps, CP-SAT status, scaling bound...

    Examples
    --------
    >>> Solution({}, 0.0, 0.0, True, "dp", 0.0).relative_gap
    0.0
    """

    assignment: dict[str, int]
    energy: float
    lower_bound: float
    optimal: bool
    method: str
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """``energy - lower_bound`` in ms (0 when proven optimal)."""
        return 0.0 if self.optimal else self.energy - self.lower_bound

    @property
    def relative_gap(self) -> float:
        """:attr:`gap` relative to ``energy`` (0 when the energy is 0)."""
        return self.gap / self.energy if self.energy > 0 else 0.0


@dataclass
class Outcome:
    """A method's answer on a :class:`~graphtune.solve.problem.Problem`.

    Parameters
    ----------
    labels : list of int
        State index per variable.
    lower_bound : float
        Proven lower bound on the problem's optimum.
    optimal : bool
        Whether ``labels`` is proven optimal.
    stats : dict
        Method details.

    Examples
    --------
    >>> Outcome([0, 1], 3.0, True).labels
    [0, 1]
    """

    labels: list[int]
    lower_bound: float
    optimal: bool
    stats: dict[str, Any] = field(default_factory=dict)
