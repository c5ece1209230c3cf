"""Bounded nonlinear least squares in plain Python: the fit behind `calibration` (chapter 11).

`bounded_least_squares(residuals, ranges, start)` minimises sum(r_i(x)^2) over a box (each parameter in its range) by
Levenberg-Marquardt: at x, the Jacobian J of the residuals (forward differences), then the step dx solving
(J^T J + lambda diag(J^T J)) dx = -J^T r over the parameters that are free to move (a parameter on an edge whose
gradient points out of the box stays there), clipped to the box; lambda shrinks after a step that lowers the loss and
grows after one that does not (Marquardt 1963; Nocedal and Wright, *Numerical Optimization*, ch. 10). Parameters are
scaled to [0, 1] by their ranges, so the differences and the damping mean the same for a fraction and for seconds.

No NumPy: the library's top level runs in the rendered book's page (Pyodide, standard library only).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Solution:
    """The minimiser `values` (name -> value), its loss sum(r^2), and the names that ended on an edge of their range."""

    values: dict
    loss: float
    at_edge: tuple
    iterations: int


def solve(matrix: list, vector: list) -> list:
    """x with matrix @ x = vector, by Gaussian elimination with partial pivoting (a small dense system)."""
    n = len(vector)
    a = [list(row) + [vector[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            raise ValueError("singular system: a parameter has no effect on the residuals")
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, n):
            factor = a[r][col] / a[col][col]
            if factor:
                for c in range(col, n + 1):
                    a[r][c] -= factor * a[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (a[r][n] - sum(a[r][c] * x[c] for c in range(r + 1, n))) / a[r][r]
    return x


def bounded_least_squares(residuals, ranges: dict, start: dict, iterations: int = 60, step: float = 1e-4,
                          tolerance: float = 1e-10) -> Solution:
    """Minimise sum(residuals(values)^2), `values` a dict name -> value with each value inside `ranges[name]`
    (low, high), starting from `start` (clipped into the box). `residuals` returns a list of floats."""
    names = list(start)
    low = [ranges[n][0] for n in names]
    width = [ranges[n][1] - ranges[n][0] for n in names]

    def values_at(z):
        return {n: low[i] + z[i] * width[i] for i, n in enumerate(names)}

    def evaluate(z):
        r = residuals(values_at(z))
        return r, sum(x * x for x in r)

    z = [min(1.0, max(0.0, (start[n] - low[i]) / width[i])) for i, n in enumerate(names)]
    r, loss = evaluate(z)
    damping, done = 1e-3, 0
    for done in range(1, iterations + 1):
        columns = []
        for i in range(len(z)):
            h = step if z[i] + step <= 1.0 else -step
            shifted = z[:i] + [z[i] + h] + z[i + 1:]
            columns.append([(a - b) / h for a, b in zip(evaluate(shifted)[0], r)])
        gradient = [sum(c * x for c, x in zip(column, r)) for column in columns]
        free = [i for i in range(len(z)) if not ((z[i] <= 0.0 and gradient[i] > 0) or (z[i] >= 1.0 and gradient[i] < 0))]
        if not free:
            break
        normal = [[sum(a * b for a, b in zip(columns[i], columns[j])) for j in free] for i in free]
        converged = False
        for _ in range(12):
            system = [[normal[a][b] * (1 + damping if a == b else 1) + (1e-12 if a == b else 0.0)
                       for b in range(len(free))] for a in range(len(free))]
            delta = solve(system, [-gradient[i] for i in free])
            trial = list(z)
            for k, i in enumerate(free):
                trial[i] = min(1.0, max(0.0, z[i] + delta[k]))
            trial_r, trial_loss = evaluate(trial)
            if trial_loss < loss:
                converged = trial_loss > loss - tolerance * max(loss, 1e-300)
                z, r, loss, damping = trial, trial_r, trial_loss, max(damping / 3, 1e-9)
                break
            damping *= 4
        else:
            break
        if converged:
            break
    edges = tuple(n for i, n in enumerate(names) if z[i] <= 1e-6 or z[i] >= 1 - 1e-6)
    return Solution(values_at(z), loss, edges, done)
