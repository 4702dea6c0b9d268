"""Rebuilding a TIR statement around changed children, for graphtune's small TIR passes.

TVM 0.27 has no Python statement mutator; :func:`with_children` rebuilds the statements that
hold others (``SeqStmt``, ``For``, ``AttrStmt``, ``IfThenElse``, ``While``; ``Bind``,
``AllocBuffer``, ``DeclBuffer`` and ``AssertStmt`` hold none there) from their children
visited in order, and returns the statement itself where nothing under it changed. A kind it
does not know is returned as is, so a pass built on it can only miss a rewrite under it.

Examples
--------
>>> from tvm import tirx
>>> i = tirx.Var("i", "int32")
>>> loop = tirx.For(i, 0, 4, tirx.ForKind.SERIAL, tirx.Evaluate(0))
>>> int(with_children(loop, lambda s: tirx.Evaluate(1)).body.value)
1
>>> with_children(loop, lambda s: s).same_as(loop)
True
"""

from __future__ import annotations

from typing import Callable

from tvm import tirx

__all__ = ["with_children"]


def with_children(stmt: tirx.Stmt, visit: Callable[[tirx.Stmt], tirx.Stmt]) -> tirx.Stmt:
    """``stmt`` with each statement directly under it replaced by ``visit`` of it (in order)."""
    if isinstance(stmt, tirx.SeqStmt):
        seq = [visit(s) for s in stmt.seq]
        return stmt if all(a.same_as(b) for a, b in zip(seq, stmt.seq)) else tirx.SeqStmt(seq)
    if isinstance(stmt, tirx.For):
        body = visit(stmt.body)
        return stmt if body.same_as(stmt.body) else tirx.For(
            stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, stmt.annotations,
            stmt.step)
    if isinstance(stmt, tirx.AttrStmt):
        body = visit(stmt.body)
        return stmt if body.same_as(stmt.body) else tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body)
    if isinstance(stmt, tirx.IfThenElse):
        then = visit(stmt.then_case)
        other = None if stmt.else_case is None else visit(stmt.else_case)
        if then.same_as(stmt.then_case) and (other is None or other.same_as(stmt.else_case)):
            return stmt
        return tirx.IfThenElse(stmt.condition, then, other)
    if isinstance(stmt, tirx.While):
        body = visit(stmt.body)
        return stmt if body.same_as(stmt.body) else tirx.While(stmt.condition, body)
    return stmt
