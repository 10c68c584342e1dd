"""Read `[[launch]]`: the kernel each step runs, its geometry, and what each argument gets."""

from __future__ import annotations

from typing import Any

from graders.spec.fields import FieldReader
from graders.spec.model import LaunchSpec, ParamSpec


def read_launches(
    ctx: FieldReader, value: Any, params: list[ParamSpec], kernels: tuple[str, ...]
) -> list[LaunchSpec]:
    """The launches in order. The first launch of each kernel fixes that kernel's signature."""
    by_name = {p.name: p for p in params}

    def one(item: Any, path: str) -> LaunchSpec:
        launch = ctx.table(
            item, path, required={"block", "grid"}, optional={"shared_bytes", "args", "kernel"}
        )
        block = ctx.list_of(launch["block"], f"{path}.block", ctx.expr, min_len=1, max_len=3)
        grid = ctx.list_of(launch["grid"], f"{path}.grid", ctx.expr, min_len=1, max_len=3)
        shared = ctx.expr(launch.get("shared_bytes", 0), f"{path}.shared_bytes")
        if "args" in launch:
            # A param's name is taken as is (`in` is a name here, though not in Python).
            args = ctx.list_of(
                launch["args"],
                f"{path}.args",
                lambda v, p: v if isinstance(v, str) and v in by_name else ctx.expr(v, p),
                min_len=1,
            )
        else:
            args = [p.name for p in params]
        if "kernel" in launch:
            kernel = ctx.string(launch["kernel"], f"{path}.kernel")
            if kernel not in kernels:
                ctx.fail(
                    f"{path}.kernel",
                    f"{kernel!r} is not one of the lab's kernels ({', '.join(kernels)})",
                )
        elif len(kernels) > 1:
            ctx.fail(
                path,
                f"'kernel' is missing (the lab has {len(kernels)} kernels: "
                f"{', '.join(kernels)}; each launch names the one it runs)",
            )
        else:
            kernel = kernels[0]
        return LaunchSpec(tuple(block), tuple(grid), shared, tuple(args), kernel)

    launches = ctx.list_of(value, "launch", one, min_len=1)
    signatures: dict[str, list[ParamSpec]] = {}
    for li, launch in enumerate(launches):
        if launch.kernel not in signatures:
            for i, entry in enumerate(launch.args):
                if not isinstance(entry, str) or entry not in by_name:
                    ctx.fail(
                        f"launch[{li}].args[{i}]",
                        f"{entry!r} is not a parameter name; the first launch of {launch.kernel} "
                        "fixes its signature, so each of its arguments must name a param",
                    )
            signatures[launch.kernel] = [by_name[str(a)] for a in launch.args]
            continue
        _check_later_launch(ctx, li, launch, signatures[launch.kernel], by_name)
    for kernel in kernels:
        if kernel not in signatures:
            ctx.fail("launch", f"no launch runs the kernel {kernel!r} that lab.kernels names")
    used = {a for launch in launches for a in launch.args if isinstance(a, str)}
    for i, p in enumerate(params):
        if p.name not in used:
            ctx.fail(f"params[{i}]", f"{p.name!r} is not passed to any launch")
    return launches


def _check_later_launch(
    ctx: FieldReader,
    li: int,
    launch: LaunchSpec,
    signature: list[ParamSpec],
    by_name: dict[str, ParamSpec],
) -> None:
    """A later launch of a kernel passes arguments that fit the signature its first fixed."""
    if len(launch.args) != len(signature):
        ctx.fail(
            f"launch[{li}].args",
            f"has {len(launch.args)} arguments; the kernel {launch.kernel} takes {len(signature)}",
        )
    for i, (entry, slot) in enumerate(zip(launch.args, signature, strict=True)):
        param = by_name.get(entry) if isinstance(entry, str) else None
        where = f"launch[{li}].args[{i}]"
        if slot.is_array:
            if param is None or not param.is_array or param.dtype != slot.dtype:
                ctx.fail(
                    where,
                    f"must name a {slot.dtype} array parameter "
                    f"(the kernel's argument {slot.name} is one)",
                )
        elif param is not None and (param.is_array or param.dtype != slot.dtype):
            ctx.fail(where, f"{entry!r} must be a {slot.dtype} scalar or an expression")
