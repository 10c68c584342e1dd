"""The barrier problem, found statically: flagged where a barrier is divergent, silent elsewhere."""

from __future__ import annotations

import pytest

from graders.compile.static_checks import find_barrier_problems

# The shape of seed 004's tiled kernel (written here): the whole tile loop, barriers included,
# sits inside the bounds check on the output element.
BARRIER_IN_BOUNDS_CHECK = """\
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
#define T 8
    __shared__ float sa[T][T];
    __shared__ float sb[T][T];
    int r = blockIdx.y * T + threadIdx.y;
    int c = blockIdx.x * T + threadIdx.x;
    int x = threadIdx.x, y = threadIdx.y;
    float acc = 0.0f;
    if ((r < M) && (c < K))
    {
        for (int p = 0; p < N / T + 1; p++)
        {
            sa[y][x] = (p * T + x < N) ? A[r * N + p * T + x] : 0.0f;
            sb[y][x] = (p * T + y < N) ? B[(p * T + y) * K + c] : 0.0f;
            __syncthreads();
            for (int q = 0; q < T; q++)
                acc += sa[y][q] * sb[q][x];
            __syncthreads();
        }
        C[r * K + c] = acc;
    }
}
"""

# The correct tiled kernel: bounds checks only around loads and the store.
CORRECT_TILED = """\
#define TILE_WIDTH 16
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE_WIDTH][TILE_WIDTH], Bs[TILE_WIDTH][TILE_WIDTH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int Row = blockIdx.y * blockDim.y + ty, Col = blockIdx.x * blockDim.x + tx;
    float sum = 0;
    for (int t = 0; t < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++t) {
        if (Row < M && t * TILE_WIDTH + tx < N) As[ty][tx] = A[Row * N + t * TILE_WIDTH + tx];
        else As[ty][tx] = 0;
        if (Col < K && t * TILE_WIDTH + ty < N) Bs[ty][tx] = B[(t * TILE_WIDTH + ty) * K + Col];
        else Bs[ty][tx] = 0;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE_WIDTH; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (Row < M && Col < K) C[Row * K + Col] = sum;
}
"""

# Seed 002's shared-memory tree sum: the loop bound comes from blockDim (uniform), and the
# thread-dependent `if` holds no barrier.
TREE_SUM = """\
extern "C" __global__ void block_sum(const float* src, float* partial, unsigned int n)
{
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    float v = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x)
        v += src[i];
    sdata[tid] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = sdata[0];
    if (blockIdx.x == 0) { __syncthreads(); }  // the same for the whole block
}
"""


def test_seed_004_shape_is_flagged_at_both_barriers() -> None:
    findings = find_barrier_problems(BARRIER_IN_BOUNDS_CHECK)
    assert [f.line for f in findings] == [16, 19]
    for f in findings:
        assert f.tool == "static" and f.kind == "divergent_barrier"
        assert "`__syncthreads()` is inside `if ((r < M) && (c < K))` on line 10" in f.message
        assert "through c, r" in f.message and "barrier problem" in f.message


@pytest.mark.parametrize("source", [CORRECT_TILED, TREE_SUM], ids=["tiled", "tree-sum"])
def test_correct_kernels_are_not_flagged(source: str) -> None:
    assert find_barrier_problems(source) == []


def test_early_return_before_a_barrier() -> None:
    source = """\
extern "C" __global__ void k(float* a, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    s[threadIdx.x] = a[i];
    __syncthreads();
    a[i] = s[255 - threadIdx.x];
}
"""
    (finding,) = find_barrier_problems(source)
    assert finding.line == 4 and "barrier on line 6" in finding.message
    assert "`if (i >= n)`" in finding.message


def test_early_return_after_the_last_barrier_is_fine() -> None:
    source = """\
extern "C" __global__ void k(float* a, int n) {
    __shared__ float s[256];
    s[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    if (threadIdx.x >= n) return;
    a[threadIdx.x] = s[0];
}
"""
    assert find_barrier_problems(source) == []


@pytest.mark.parametrize(
    ("barrier", "named"),
    [
        ("__syncwarp();", "`__syncwarp()`"),
        ("__syncthreads_or(1);", "`__syncthreads_or()`"),
        ("block.sync();", "`sync()`"),
        ("cg::sync(block);", "`cg::sync()`"),
        ('asm volatile("bar.sync 0;");', "`bar.sync` (inline PTX)"),
    ],
)
def test_every_barrier_spelling_is_seen(barrier: str, named: str) -> None:
    # A group's sync is a block barrier where the group is the block (a tile's is not).
    source = f"""\
__global__ void k(float* a, int n) {{
    int i = threadIdx.x; cg::thread_block block = cg::this_thread_block();
    while (i < n) {{
        a[i] = 0;
        {barrier}
        i += blockDim.x;
    }}
}}
"""
    (finding,) = find_barrier_problems(source)
    assert finding.line == 5 and finding.message.startswith(f"{named} is inside `while (i < n)`")


def test_else_branch_and_grid_stride_loop_are_divergent() -> None:
    source = """\
__global__ void k(float* a, int n) {
    int tid = threadIdx.x;
    if (tid < 32) a[tid] = 1;
    else { __syncthreads(); }
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) {
        __syncthreads();
    }
}
"""
    findings = find_barrier_problems(source)
    assert [f.line for f in findings] == [4, 6]
    assert "inside `else (tid < 32)`" in findings[0].message
    assert "inside `for (i < n)`" in findings[1].message


def test_comments_and_strings_do_not_count() -> None:
    source = """\
__global__ void k(float* a) {
    int t = threadIdx.x;
    if (t < 4) {
        // __syncthreads();
        /* __syncthreads(); */
        printf("__syncthreads()\\n");
    }
}
"""
    assert find_barrier_problems(source) == []


def test_deep_nesting_neither_crashes_nor_hides_ordinary_depths() -> None:
    def nested(depth: int) -> str:
        body = "if (threadIdx.x) {" * depth + "__syncthreads();" + "}" * depth
        return "__global__ void k() {" + body + "}"

    assert len(find_barrier_problems(nested(50))) == 1
    assert find_barrier_problems(nested(5000)) == []  # too deep to follow: silence, no crash


def test_many_barriers_stay_fast_enough_to_finish() -> None:
    source = "__global__ void k() { if (threadIdx.x) {" + "__syncthreads();" * 20000 + "}}"
    assert len(find_barrier_problems(source)) == 20000


def test_warp_barrier_under_a_warp_aligned_condition_is_fine() -> None:
    source = """\
__global__ void k(float* s) {
    int tid = threadIdx.x;
    if (tid < 32) {
        s[tid] += s[tid + 32];
        __syncwarp();
        s[tid] += s[tid + 16];
    }
    if (tid < 20) { __syncwarp(); }
}
"""
    (finding,) = find_barrier_problems(source)
    assert finding.line == 8


def test_a_long_comma_chain_is_read_once_and_still_taints() -> None:
    # Each `a = 1` of `a = 1, a = 1, ...;` was read to the statement's end: quadratic, about two
    # minutes of the worker's CPU for a 256 KiB file that compiles. Now each right-hand side
    # ends at the next comma (tests/graders/compile/test_bounded_work.py counts the steps).
    source = (
        'extern "C" __global__ void k(int* x) {\n    int a = 0;\n    a = threadIdx.x'
        + ", a = a" * 10
        + ";\n    if (a) __syncthreads();\n    x[0] = a;\n}\n"
    )
    assert [f.line for f in find_barrier_problems(source)] == [4]


def test_a_chain_written_backwards_taints_through_the_loop_it_is_in() -> None:
    # b49 = b48; ...; b1 = b0; b0 = threadIdx.x: in a loop, the thread index reaches b49 after
    # 50 rounds; tainting spreads along the chain whatever its order (one pass over the edges;
    # sweeping until nothing changed was quadratic). In straight-line code b49 is read before
    # the chain carries anything, and is left alone.
    names = [f"b{i}" for i in range(50)]
    chain = "".join(f"        {names[i]} = {names[i - 1]};\n" for i in range(49, 0, -1))
    head = 'extern "C" __global__ void k(int* x) {\n    int ' + ", ".join(names) + " = 0;\n"
    tail = "    if (b49) __syncthreads();\n    x[0] = b49;\n}\n"
    looped = (
        head + "    for (int r = 0; r < 50; ++r) {\n" + chain + "        b0 = threadIdx.x;\n    }\n"
    )
    assert [f.line for f in find_barrier_problems(looped + tail)] == [55]
    straight = head + chain + "    b0 = threadIdx.x;\n"
    assert find_barrier_problems(straight + tail) == []


HELPERS = """\
#define SYNC() __syncthreads()
#define LOAD_AND_SYNC(s, v) { s[threadIdx.x] = v; SYNC(); }
__device__ void inner(float* s) { __syncthreads(); }
__device__ void outer(float* s) { s[0] = 1; inner(s); }
__device__ float plain(float x) { return 2 * x; }
extern "C" __global__ void k(float* a, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    outer(s);
    if (blockIdx.x > 0) LOAD_AND_SYNC(s, a[0]);
    if (i < n) {
        a[i] = plain(a[i]);
        outer(s);
        LOAD_AND_SYNC(s, a[i]);
    }
}
"""


def test_calls_and_macros_that_reach_a_barrier_are_named_with_both_lines() -> None:
    findings = find_barrier_problems(HELPERS)
    assert [f.line for f in findings] == [13, 14]
    assert findings[0].message.startswith(
        "`outer()` (which reaches `__syncthreads()` on line 3) is inside `if (i < n)` on line 11"
    )
    assert findings[1].message.startswith(
        "`LOAD_AND_SYNC` (a macro that reaches `__syncthreads()` on line 1) is inside "
    )


def test_a_helper_is_checked_on_its_own_and_recursion_ends() -> None:
    source = """\
__device__ void helper(float* s, int n) {
    if (threadIdx.x < n) __syncthreads();
    helper(s, n - 1);
}
__device__ void a(); __device__ void b() { a(); } __device__ void a() { b(); }
extern "C" __global__ void k(float* s) { if (threadIdx.x) { a(); } helper(s, 4); }
"""
    findings = find_barrier_problems(source)
    assert [f.line for f in findings] == [2]


def test_a_function_named_like_a_variable_is_no_call() -> None:
    source = """\
__device__ void sync_all() { __syncthreads(); }
extern "C" __global__ void k(float* a) {
    int sync_all_done = threadIdx.x;
    if (sync_all_done) a[0] = 1;
}
"""
    assert find_barrier_problems(source) == []


def test_nested_do_while_loops_are_walked_once() -> None:
    from graders.compile import work

    def nested(depth: int) -> str:
        return (
            'extern "C" __global__ void k(int n) { int i = threadIdx.x;'
            + "do {" * depth + "__syncthreads();" + "} while (i < n);" * depth + "}"
        )  # fmt: skip

    # 2^depth steps before: depth 30 did not finish.
    with work.measured() as taken:
        findings = find_barrier_problems(nested(100))
    assert [f.line for f in findings] == [1] and "`do (i < n)`" in findings[0].message
    assert taken.steps < 100 * len(nested(100))


DOT_REUSING_I = """\
extern "C" __global__ void dot(const double* a, const double* b, double* partial, int n)
{
    __shared__ double cache[1024];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double temp = 0;
    while (i < n) {
        temp += a[i] * b[i];
        i += blockDim.x * gridDim.x;
    }
    cache[threadIdx.x] = temp;
    __syncthreads();
    i = blockDim.x / 2;
    while (i != 0) {
        if (threadIdx.x < i) cache[threadIdx.x] += cache[threadIdx.x + i];
        __syncthreads();
        i /= 2;
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = cache[0];
}
"""


def test_a_variable_reassigned_from_a_uniform_value_is_clean_again() -> None:
    # A correct dot product that reuses i as the reduction's stride drew a barrier warning.
    assert find_barrier_problems(DOT_REUSING_I) == []


@pytest.mark.parametrize(
    ("change", "line"),
    [
        # Reassigned from the thread index inside the loop: tainted from the second round on.
        ("        i /= 2;", 15),
        # Tainted on one branch before the loop: tainted after the branches meet.
        ("    i = blockDim.x / 2;", 17),
    ],
)
def test_taint_that_reaches_the_loop_on_some_path_is_kept(change: str, line: int) -> None:
    replacement = {
        "        i /= 2;": "        i /= 2;\n        if (n > 7) i = threadIdx.x;",
        "    i = blockDim.x / 2;": "    i = blockDim.x / 2;\n    if (n > 7) i = threadIdx.x;\n"
        "    else i = 4;",
    }[change]
    source = DOT_REUSING_I.replace(change, replacement)
    (finding,) = find_barrier_problems(source)
    assert finding.line == line and "through i" in finding.message
    assert finding.message.startswith("`__syncthreads()` is inside `while (i != 0)`")


@pytest.mark.parametrize(
    "declaration",
    [
        "unsigned i{blockIdx.x * blockDim.x + threadIdx.x};",
        "unsigned int i(blockIdx.x * blockDim.x + threadIdx.x);",
        "const unsigned i{blockIdx.x * blockDim.x + threadIdx.x};",
        "int base = 0, i{base + (int)threadIdx.x};",
        "auto i{threadIdx.x};",
    ],
)
def test_an_index_initialised_in_braces_or_parentheses_is_thread_dependent(
    declaration: str,
) -> None:
    # `unsigned i{...}` got no warning where `unsigned i = ...` got one.
    source = f"""\
extern "C" __global__ void k(float* a, unsigned n) {{
    __shared__ float s[256];
    {declaration}
    if (i >= n) return;
    s[threadIdx.x] = a[i];
    __syncthreads();
    a[i] = s[255 - threadIdx.x];
}}
"""
    (finding,) = find_barrier_problems(source)
    assert finding.line == 4 and "barrier on line 6" in finding.message
    assert "`if (i >= n)`" in finding.message and "through i" in finding.message


@pytest.mark.parametrize(
    "declaration",
    [
        "unsigned i{blockIdx.x};",  # the same for the whole block
        "dim3 grid(gridDim.x, 1);\n    unsigned i(grid.x);",
        "int i = 0;\n    helper(threadIdx.x);",  # a call, not a declaration
    ],
)
def test_an_initialiser_the_block_shares_is_not_divergent(declaration: str) -> None:
    source = f"""\
__device__ void helper(unsigned) {{}}
extern "C" __global__ void k(float* a, unsigned n) {{
    {declaration}
    if (i >= n) return;
    __syncthreads();
    a[threadIdx.x] = 0.0f;
}}
"""
    assert find_barrier_problems(source) == []


def test_barriers_in_dead_branches_are_not_reported() -> None:
    source = """\
extern "C" __global__ void k(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#if 0
    if (i < n) __syncthreads();
#endif
#ifndef __CUDACC__
    if (i < n) __syncthreads();
#endif
    if (i < n) a[i] = 0.0f;
}
"""
    assert find_barrier_problems(source) == []
    assert len(find_barrier_problems(source.replace("#if 0", "#if 1"))) == 1


# --- barriers that cannot diverge (issue 34, case 5) --------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        # The mask names the lanes that take the branch: lanes 0 to 15 of the first warp.
        "if (tid < 16) {\n        s[tid] += s[tid + 16];\n        __syncwarp(0xffff);\n    }",
        "if (tid % 32 < 8) { __syncwarp(__activemask()); }",
        # A block-wide reduction is the same value in every thread of the block.
        "while (__syncthreads_or(i < n)) {\n        __syncthreads();\n        i += 256;\n    }",
        "for (; __syncthreads_and(i < n); i += 256) { __syncthreads(); }",
        "int more = __syncthreads_count(i < n);\n    if (more) { __syncthreads(); }",
        "do { __syncthreads(); i += 256; } while (__syncthreads_or(i < n));",
        # A tile's or a coalesced group's sync: whether the branch splits it is not read here.
        "auto tile = cg::tiled_partition<32>(cg::this_thread_block());\n"
        "    if (tid < 64) { tile.sync(); }",
        "if (tid < 64) { cg::sync(cg::coalesced_threads()); }",
    ],
)
def test_barriers_that_cannot_diverge_get_no_warning(body: str) -> None:
    source = (
        "__global__ void k(float* s, int n) {\n"
        "    int tid = threadIdx.x;\n"
        "    int i = blockIdx.x * blockDim.x + tid;\n"
        f"    {body}\n"
        "}\n"
    )
    assert find_barrier_problems(source) == []


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("if (tid < n) __syncthreads();", "`__syncthreads()`"),
        ("if (tid < 16) { __syncwarp(); }", "`__syncwarp()`"),
        ("if (tid < 16) { __syncwarp(0xffffffffu); }", "`__syncwarp()`"),
        ("if (tid < n) { cg::this_thread_block().sync(); }", "`sync()`"),
        ("auto block = cg::this_thread_block();\n    if (tid < n) { block.sync(); }", "`sync()`"),
        ("cg::thread_block b = cg::this_thread_block();\n    if (tid < n) { cg::sync(b); }",
         "`cg::sync()`"),
        # A reduction beside a thread-dependent test does not make the test uniform.
        ("if (tid < n && __syncthreads_or(tid < 8)) { __syncthreads(); }", "`__syncthreads()`"),
        ("int mine = __syncthreads_or(tid < 8) + tid;\n    if (mine) { __syncthreads(); }",
         "`__syncthreads()`"),
    ],
)  # fmt: skip
def test_a_block_barrier_under_a_thread_condition_still_warns(body: str, named: str) -> None:
    source = f"__global__ void k(int n) {{\n    int tid = threadIdx.x;\n    {body}\n}}\n"
    findings = find_barrier_problems(source)
    assert findings and findings[-1].message.startswith(f"{named} is inside `if ("), findings
    assert len([f for f in findings if f.message.startswith(named)]) == 1, findings
