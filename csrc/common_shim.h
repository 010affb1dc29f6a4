/* A narrow C interface to the parts of llama.cpp's common/ library that llama-server uses to
 * handle requests. Strings in and out are UTF-8 JSON or text; every returned string is malloc'd
 * and owned by the caller (free it with pyly_free). On failure a function returns NULL and, when
 * `error` is not NULL, sets *error to a malloc'd message. Plain C so that cffi can bind it. */
#ifndef PYLLAMA_COMMON_SHIM_H
#define PYLLAMA_COMMON_SHIM_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(PYLY_BUILD)
#    define PYLY_API __declspec(dllexport)
#elif defined(_WIN32)
#    define PYLY_API __declspec(dllimport)
#else
#    define PYLY_API __attribute__((visibility("default")))
#endif

/* GBNF for a JSON schema (given as JSON text), exactly as llama-server converts `json_schema`
 * and `response_format`. */
PYLY_API char * pyly_json_schema_to_grammar(const char * schema_json, char ** error);

/* llama-server's sampler (common_sampler): its chain order, logit biases, DRY, XTC, mirostat,
 * grammar applied by rejection sampling, lazy grammars with triggers. `params_json` holds the
 * fields of common_params_sampling under their C++ names; fields left out keep their defaults.
 * `model` and `ctx` are a `struct llama_model *` and a `struct llama_context *`. */
typedef struct pyly_sampler pyly_sampler;

PYLY_API pyly_sampler * pyly_sampler_init(const void * model, const char * params_json, char ** error);
PYLY_API void pyly_sampler_free(pyly_sampler * smpl);
/* Back to the state pyly_sampler_init left it in (penalty and DRY histories cleared, each random
 * state seeded again from its seed, a random seed drawn anew): what a new sampler made from the
 * same parameters would be, for the cost of a few clears. Returns 0, or -1 for a sampler with a
 * grammar or a reasoning budget, whose state a reset does not bring back (make a new one). */
PYLY_API int pyly_sampler_reset(pyly_sampler * smpl);
/* Samples from output `idx` of the last decode; does not accept the token. Returns -1 (and sets
 * *error) on failure, e.g. when a grammar leaves no valid token. */
PYLY_API int pyly_sampler_sample(pyly_sampler * smpl, void * ctx, int idx, char ** error);
/* Returns 0, or -1 (and sets *error) when the grammar cannot accept the token. */
PYLY_API int pyly_sampler_accept(pyly_sampler * smpl, int token, int is_generated, char ** error);
/* Accepts the `n` tokens of a prompt (not generated: the penalties' history, not the grammar),
 * skipping negative ones (media cells), in one call: a long prompt costs one crossing of the
 * binding, not one per token. Returns 0, or -1 (and sets *error). */
PYLY_API int pyly_sampler_accept_prompt(pyly_sampler * smpl, const int * tokens, int n, char ** error);
/* Samples and accepts for `n` samplers at once, sampler i from output idxs[i] of the last decode,
 * on up to `n_threads` threads (the CPU backend's OpenMP team where there is one: its threads
 * only wait between decodes). Each sampler must appear once. Writes tokens[i] and status[i]: 0,
 * 1 when the sample failed, 2 when the grammar could not accept the token (errors[i] then says
 * why, to be freed with pyly_free). Returns how many failed. */
PYLY_API int pyly_sampler_sample_accept_many(pyly_sampler ** smpls, void * ctx, const int * idxs, int n,
                                             int n_threads, int * tokens, int * status, char ** errors);
/* A generation step in one call: rings the doorbells (writes eight bytes to each non-blocking
 * pipe, so that the event loops waiting for the step's earlier results wake while this thread
 * holds no GIL), decodes `batch` (a `struct llama_batch *`) and, when that went through, samples
 * and accepts as pyly_sampler_sample_accept_many (with no sampler, it synchronizes the outputs).
 * Writes llama_decode's code to *decode_code; returns how many samplers failed (0 when the decode
 * did not go through: nothing sampled). */
PYLY_API int pyly_decode_sample_accept_many(void * ctx, const void * batch, const int * doorbells, int n_doorbells,
                                            int * decode_code, pyly_sampler ** smpls, const int * idxs, int n,
                                            int n_threads, int * tokens, int * status, char ** errors);
/* The candidates of the last sample after the whole chain, sorted by probability: writes up to
 * `n` ids and probabilities and the sampled token's probability, returns how many were written. */
PYLY_API int pyly_sampler_candidates(pyly_sampler * smpl, int n, int * ids, float * probs, float * p_selected);

/* Chat templates as llama-server renders them (common_chat_templates: the Jinja engine, or the
 * built-in formats), and the parser for what the model answers (content, reasoning, tool calls).
 * `template_override` is a template or a built-in name, NULL or "" for the model's own. */
typedef struct pyly_chat pyly_chat;

PYLY_API pyly_chat * pyly_chat_init(const void * model, const char * template_override, char ** error);
PYLY_API void pyly_chat_free(pyly_chat * chat);
/* {"source": the default template, "tool_use": the tool-use variant or "", "caps": {...}} */
PYLY_API char * pyly_chat_info(pyly_chat * chat, char ** error);
/* inputs: {"messages": OpenAI messages, "tools", "tool_choice", "json_schema", "grammar",
 * "use_jinja", "parallel_tool_calls", "add_generation_prompt", "continue_final_message",
 * "reasoning_format", "enable_thinking", "chat_template_kwargs": {name: JSON text}}
 * returns common_chat_params as JSON: prompt, format, grammar, grammar_lazy, grammar_triggers,
 * preserved_tokens, additional_stops, parser, generation_prompt, thinking tags. */
PYLY_API char * pyly_chat_apply(pyly_chat * chat, const char * inputs_json, char ** error);
/* A chat answer's parser (common_chat_parse with its parameters read, and its PEG parser loaded,
 * once per answer, as llama-server keeps them per task): params {"format", "reasoning_format",
 * "reasoning_in_content", "generation_prompt", "parse_tool_calls", "is_continuation", "parser"}.
 * pyly_chat_parser_parse returns {"role", "content", "reasoning_content", "tool_calls": [{"name",
 * "arguments", "id"}]} for the whole text so far (`is_partial` while it still grows). */
typedef struct pyly_chat_parser pyly_chat_parser;

PYLY_API pyly_chat_parser * pyly_chat_parser_init(const char * params_json, char ** error);
PYLY_API void pyly_chat_parser_free(pyly_chat_parser * parser);
PYLY_API char * pyly_chat_parser_parse(pyly_chat_parser * parser, const char * text, int is_partial, char ** error);

PYLY_API void pyly_free(void * ptr);

#ifdef __cplusplus
}
#endif

#endif
