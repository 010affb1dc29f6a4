// Native reference for scripts/bench_decode.py: the same greedy decode loop, in C, over the same
// libllama. Usage: bench_decode MODEL N_THREADS N_GEN ROUNDS TOKEN...  -> one JSON line per round.
// Like the Python side, the model is loaded once and each round uses a fresh context.
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void quiet(enum ggml_log_level level, const char * text, void * data) {
    (void) level; (void) text; (void) data;
}

static int run_round(struct llama_model * model, int n_threads, const llama_token * prompt, int n_prompt,
                     int n_gen) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_prompt + n_gen + 8;
    cp.n_batch = n_prompt;
    cp.n_ubatch = n_prompt;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    struct llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
    struct llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    llama_token * out = malloc(sizeof(llama_token) * n_gen);
    int rc = 0;

    for (int i = 0; i < n_prompt; i++) {
        batch.token[i] = prompt[i]; batch.pos[i] = i; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = 0;
        batch.logits[i] = i == n_prompt - 1;
    }
    batch.n_tokens = n_prompt;
    double t0 = now_s();
    if (llama_decode(ctx, batch) != 0) { rc = 1; goto done; }
    double t_pp = now_s() - t0;

    t0 = now_s();
    for (int i = 0, pos = n_prompt; i < n_gen; i++, pos++) {
        llama_token tok = llama_sampler_sample(smpl, ctx, -1);
        out[i] = tok;
        batch.token[0] = tok; batch.pos[0] = pos; batch.n_seq_id[0] = 1; batch.seq_id[0][0] = 0;
        batch.logits[0] = 1;
        batch.n_tokens = 1;
        if (llama_decode(ctx, batch) != 0) { rc = 1; goto done; }
    }
    double t_tg = now_s() - t0;

    printf("{\"tokens\": [");
    for (int i = 0; i < n_gen; i++) printf(i ? ", %d" : "%d", out[i]);
    printf("], \"pp_s\": %.9f, \"tg_s\": %.9f}\n", t_pp, t_tg);
    fflush(stdout);
done:
    free(out);
    llama_batch_free(batch);
    llama_sampler_free(smpl);
    llama_free(ctx);
    return rc;
}

int main(int argc, char ** argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s MODEL N_THREADS N_GEN ROUNDS TOKEN...\n"
                        "  BENCH_BACKEND_DIR: load the backend modules there (a GGML_BACKEND_DL build)\n"
                        "  BENCH_N_GPU_LAYERS: layers to offload (default: llama.cpp's, all)\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    if (getenv("BENCH_BACKEND_DIR")) ggml_backend_load_all_from_path(getenv("BENCH_BACKEND_DIR"));
    llama_backend_init();
    const int n_threads = atoi(argv[2]);
    const int n_gen = atoi(argv[3]);
    const int n_rounds = atoi(argv[4]);
    const int n_prompt = argc - 5;
    llama_token * prompt = malloc(sizeof(llama_token) * n_prompt);
    for (int i = 0; i < n_prompt; i++) prompt[i] = atoi(argv[5 + i]);

    struct llama_model_params mparams = llama_model_default_params();
    if (getenv("BENCH_N_GPU_LAYERS")) mparams.n_gpu_layers = atoi(getenv("BENCH_N_GPU_LAYERS"));
    struct llama_model * model = llama_model_load_from_file(argv[1], mparams);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    int rc = 0;
    for (int r = 0; r < n_rounds && rc == 0; r++) rc = run_round(model, n_threads, prompt, n_prompt, n_gen);
    llama_model_free(model);
    llama_backend_free();
    free(prompt);
    return rc;
}
