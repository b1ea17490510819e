"""llama.cpp's figures for bench/local_vs_llama_cpp.sh, through llama-cpp-python: load,
prompt and generation tokens/s, time to first token and peak RSS of this process, on the
same GGUF file, the same rendered prompts and the same thread count as axocoatl's.

    python llama_cpp_timings.py MODEL PROMPTS_FILE THREADS [BUSY]

PROMPTS_FILE holds the long prompt and the generation prompt, NUL-separated, as the chat
template renders them (`local_timings MODEL --prompts`). BUSY processes spin beside the model.
The CPU time behind `prompt_tok_per_cpu_s` and `gen_tok_per_cpu_s` is this whole process's
(every llama.cpp thread), as getrusage(RUSAGE_SELF) reports it: the spinners are processes of
their own, so it is the model's alone.
"""
import resource
import sys
import threading
import time

GEN_TOKENS = 128


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def spin(stop):
    x = 0
    while not stop.is_set():
        x = (x * 6364136223846793005 + 1) & 0xFFFFFFFFFFFFFFFF


def main():
    model, prompts, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    busy = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    long_prompt, gen_prompt = open(prompts, encoding="utf-8").read().split("\0")[:2]
    stop = threading.Event()
    # Python threads share one interpreter lock: busy work comes from processes instead.
    spinners = []
    if busy:
        import multiprocessing

        spinners = [multiprocessing.Process(target=spin, args=(stop,)) for _ in range(busy)]
        for p in spinners:
            p.start()
    import llama_cpp

    started = time.perf_counter()
    llm = llama_cpp.Llama(
        model_path=model,
        n_ctx=4096,
        n_threads=threads,
        n_threads_batch=threads,
        n_batch=512,
        verbose=False,
    )
    load = time.perf_counter() - started

    def tokens(text):
        return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    # Warm-up, as axocoatl's side does.
    llm.reset()
    llm.eval(tokens("Hi"))

    prompt = tokens(long_prompt)
    llm.reset()
    t, c = time.perf_counter(), cpu()
    llm.eval(prompt)
    prompt_s, prompt_cpu = time.perf_counter() - t, cpu() - c

    gen = tokens(gen_prompt)
    llm.reset()
    t = time.perf_counter()
    first = None
    n = 0
    for _ in llm.generate(gen, temp=0.0, top_k=1, repeat_penalty=1.1, reset=True):
        n += 1
        if first is None:
            first = time.perf_counter() - t
            t_gen, c_gen = time.perf_counter(), cpu()
        if n >= GEN_TOKENS:
            break
    gen_s, gen_cpu = time.perf_counter() - t_gen, cpu() - c_gen
    stop.set()
    for p in spinners:
        p.terminate()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(
        f"load_s={load:.3f} prompt_tokens={len(prompt)} prompt_tok_s={len(prompt) / prompt_s:.1f} "
        f"prompt_tok_per_cpu_s={len(prompt) / prompt_cpu:.1f} gen_tokens={n} "
        f"gen_tok_s={(n - 1) / gen_s:.1f} gen_tok_per_cpu_s={(n - 1) / gen_cpu:.1f} "
        f"ttft_s={first:.3f} max_rss_mib={rss:.1f}"
    )


main()
