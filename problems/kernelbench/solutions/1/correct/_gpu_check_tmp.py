# temporary GPU verification script (helper-only; deleted after use)
import os, sys, time, importlib.util, json, gc
import torch, triton
R = os.path.dirname(os.path.abspath(__file__)).rsplit("/problems/", 1)[0] + "/problems"
CASES = [("kernelbench", n) for n in [19, 21, 88, 23, 24, 36, 37, 39, 40, 47, 89, 94, 100, 1]] + [("dlrm", 1), ("dlrm", 2)]
only = sys.argv[1:]
def pfile(s, n):
    d = f"{R}/{s}/level1" if s == "kernelbench" else f"{R}/{s}"
    return [os.path.join(d, f) for f in os.listdir(d) if f.startswith(f"{n}_") and f.endswith(".py")][0]
def load(p, name):
    spec = importlib.util.spec_from_file_location(name, p); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
def timeit(f, inp, iters=10):
    for _ in range(2): f(*inp)
    torch.cuda.synchronize(); ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(*inp); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return sum(ts) / len(ts)
print(torch.__version__, triton.__version__, torch.cuda.get_device_name())
for s, n in CASES:
    if only and f"{s}/{n}" not in only: continue
    pf = pfile(s, n); ns = {"__name__": "p"}; exec(open(pf).read(), ns)
    mod = load(f"{R}/{s}/solutions/{n}/correct/triton.py", f"sol_{s}_{n}")
    for dt in (torch.float32, torch.bfloat16):
        try:
            torch.manual_seed(42)
            with torch.device("cuda"):
                inp = ns["get_inputs"]()
            inp = [t.to(dt) if torch.is_tensor(t) and t.is_floating_point() else t for t in inp]
            init = ns["get_init_inputs"]()
            torch.manual_seed(1); ref = ns["Model"](*init).cuda().to(dt)
            torch.manual_seed(1); new = mod.ModelNew(*init).cuda().to(dt)
            t0 = time.time()
            with torch.no_grad():
                y = ref(*inp); y2 = new(*inp); torch.cuda.synchronize()
                tc = time.time() - t0
                d = (y2.float() - y.float())
                fro = (d.norm() / y.float().norm()).item(); mx = (d.abs().max() / y.float().abs().max()).item()
                tol = 1e-4 if dt == torch.float32 else 1e-2
                ac = torch.allclose(y2.float(), y.float(), atol=tol, rtol=tol)
                del d, y, y2
                tr = timeit(ref, inp); tn = timeit(new, inp)
            nbytes = sum(t.numel() * t.element_size() for t in inp if torch.is_tensor(t))
            print(f"{s}/{n:<4} {str(dt)[6:]:9s} shape={tuple(inp[0].shape)} fro={fro:.2e} max={mx:.2e} allclose={ac} "
                  f"ref={tr:.3f}ms new={tn:.3f}ms speedup={tr/tn:.2f} in_GB/s(new)={nbytes/tn/1e6:.0f} first={tc:.1f}s", flush=True)
        except Exception as e:
            print(f"{s}/{n} {dt} ERROR {type(e).__name__}: {str(e)[:500]}", flush=True)
        finally:
            inp = ref = new = None; gc.collect(); torch.cuda.empty_cache()
