// The C side of common_shim.h: C++ exceptions never cross into C (or Python); they become an
// error string.
#include "common_shim.h"

#include "chat.h"
#include "common.h"
#include "json-schema-to-grammar.h"
#include "json.h"
#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#ifndef _WIN32
#include <unistd.h>
#endif

namespace {

char * dup_string(const std::string & s) {
    char * out = static_cast<char *>(std::malloc(s.size() + 1));
    if (out != nullptr) {
        std::memcpy(out, s.data(), s.size() + 1);
    }
    return out;
}

template <typename F>
char * guarded(char ** error, F && fn) {
    if (error != nullptr) {
        *error = nullptr;
    }
    try {
        return dup_string(fn());
    } catch (const std::exception & e) {
        if (error != nullptr) {
            *error = dup_string(e.what());
        }
    } catch (...) {
        if (error != nullptr) {
            *error = dup_string("unknown C++ exception");
        }
    }
    return nullptr;
}

void set_error(char ** error, const char * what) {
    if (error != nullptr) {
        *error = dup_string(what);
    }
}

// Overwrite the fields named in `j`; the rest keep common_params_sampling's defaults.
template <typename T>
void read(const common_json & j, const char * key, T & out) {
    if (j.contains(key) && !j.at(key).is_null()) {
        out = j.at(key).get<T>();
    }
}

common_params_sampling sampling_params_from_json(const common_json & j) {
    common_params_sampling p;
    read(j, "seed", p.seed);
    read(j, "n_prev", p.n_prev);
    read(j, "n_probs", p.n_probs);
    read(j, "min_keep", p.min_keep);
    read(j, "top_k", p.top_k);
    read(j, "top_p", p.top_p);
    read(j, "min_p", p.min_p);
    read(j, "xtc_probability", p.xtc_probability);
    read(j, "xtc_threshold", p.xtc_threshold);
    read(j, "typ_p", p.typ_p);
    read(j, "temp", p.temp);
    read(j, "dynatemp_range", p.dynatemp_range);
    read(j, "dynatemp_exponent", p.dynatemp_exponent);
    read(j, "penalty_last_n", p.penalty_last_n);
    read(j, "penalty_repeat", p.penalty_repeat);
    read(j, "penalty_freq", p.penalty_freq);
    read(j, "penalty_present", p.penalty_present);
    read(j, "dry_multiplier", p.dry_multiplier);
    read(j, "dry_base", p.dry_base);
    read(j, "dry_allowed_length", p.dry_allowed_length);
    read(j, "dry_penalty_last_n", p.dry_penalty_last_n);
    read(j, "adaptive_target", p.adaptive_target);
    read(j, "adaptive_decay", p.adaptive_decay);
    read(j, "mirostat", p.mirostat);
    read(j, "top_n_sigma", p.top_n_sigma);
    read(j, "mirostat_tau", p.mirostat_tau);
    read(j, "mirostat_eta", p.mirostat_eta);
    read(j, "ignore_eos", p.ignore_eos);
    read(j, "dry_sequence_breakers", p.dry_sequence_breakers);
    read(j, "grammar_lazy", p.grammar_lazy);
    read(j, "generation_prompt", p.generation_prompt);
    // the reasoning budget: token sequences that open and close the thinking section, and what
    // is forced once the budget is spent (the tags come from the chat template, as in llama-server)
    read(j, "reasoning_budget_tokens", p.reasoning_budget_tokens);
    read(j, "reasoning_budget_start", p.reasoning_budget_start);
    if (j.contains("reasoning_budget_end")) {  // common_json has no vector<vector<int>> getter
        for (const auto & seq : j.at("reasoning_budget_end")) {
            p.reasoning_budget_end.push_back(seq.get<std::vector<llama_token>>());
        }
    }
    read(j, "reasoning_budget_forced", p.reasoning_budget_forced);
    read(j, "reasoning_control", p.reasoning_control);
    if (j.contains("samplers")) {
        p.samplers = common_sampler_types_from_names(j.at("samplers").get<std::vector<std::string>>());
    }
    if (j.contains("grammar") && !j.at("grammar").get<std::string>().empty()) {
        // user grammars are never prefilled; the grammar type only matters for that and for chat parsing
        const auto type = static_cast<common_grammar_type>(j.value("grammar_type", (int) COMMON_GRAMMAR_TYPE_USER));
        p.grammar = common_grammar(type, j.at("grammar").get<std::string>());
    }
    if (j.contains("grammar_triggers")) {
        for (const auto & t : j.at("grammar_triggers")) {
            common_grammar_trigger trigger;
            trigger.type = static_cast<common_grammar_trigger_type>(t.at("type").get<int>());
            trigger.value = t.at("value").get<std::string>();
            trigger.token = t.value("token", (int) LLAMA_TOKEN_NULL);
            p.grammar_triggers.push_back(std::move(trigger));
        }
    }
    if (j.contains("preserved_tokens")) {
        for (const auto & t : j.at("preserved_tokens")) {
            p.preserved_tokens.insert(t.get<llama_token>());
        }
    }
    if (j.contains("logit_bias")) {
        for (const auto & b : j.at("logit_bias")) {
            // JSON has no infinity: null stands for -inf, a banned token
            const float bias = b.at(1).is_null() ? -INFINITY : b.at(1).get<float>();
            p.logit_bias.push_back({b.at(0).get<llama_token>(), bias});
        }
    }
    return p;
}

}  // namespace

struct pyly_sampler {
    common_sampler * smpl;
    // common_sampler_reset resets the chain only: a grammar (which init may also have fed the
    // generation prompt) or a reasoning budget would keep its state, so such a sampler is not reused
    bool resettable;
};

extern "C" pyly_sampler * pyly_sampler_init(const void * model, const char * params_json, char ** error) {
    if (error != nullptr) {
        *error = nullptr;
    }
    try {
        auto params = sampling_params_from_json(common_json::parse(params_json));
        common_sampler * smpl = common_sampler_init(static_cast<const llama_model *>(model), params);
        if (smpl == nullptr) {
            set_error(error, "llama.cpp could not create the sampler (is the grammar valid?)");
            return nullptr;
        }
        const bool resettable = common_grammar_value(params.grammar).empty() && params.reasoning_budget_start.empty() &&
                                params.reasoning_budget_end.empty();
        return new pyly_sampler{smpl, resettable};
    } catch (const std::exception & e) {
        // common_sampler_init rethrows a grammar failure as a bare std::exception
        const std::string what = e.what();
        set_error(error, what == "std::exception"
                             ? "the grammar does not accept the chat template's generation prompt (see the log)"
                             : what.c_str());
    }
    return nullptr;
}

extern "C" int pyly_sampler_reset(pyly_sampler * smpl) {
    if (smpl == nullptr || !smpl->resettable) {
        return -1;
    }
    common_sampler_reset(smpl->smpl);  // histories cleared, random states seeded as init seeds them
    return 0;
}

extern "C" void pyly_sampler_free(pyly_sampler * smpl) {
    if (smpl != nullptr) {
        common_sampler_free(smpl->smpl);
        delete smpl;
    }
}

// common_sampler_sample asserts (aborting the process) that the output has logits: ask first
// (in a release build llama.cpp answers NULL, with a log line, for an output it did not compute).
static llama_token sample_output(common_sampler * smpl, llama_context * ctx, int idx) {
    if (llama_get_logits_ith(ctx, idx) == nullptr) {
        throw std::invalid_argument("output " + std::to_string(idx) + " was not computed by the last decode");
    }
    return common_sampler_sample(smpl, ctx, idx);
}

extern "C" int pyly_sampler_sample(pyly_sampler * smpl, void * ctx, int idx, char ** error) {
    if (error != nullptr) {
        *error = nullptr;
    }
    try {
        return sample_output(smpl->smpl, static_cast<llama_context *>(ctx), idx);
    } catch (const std::exception & e) {
        set_error(error, e.what());
    }
    return -1;
}

extern "C" int pyly_sampler_accept(pyly_sampler * smpl, int token, int is_generated, char ** error) {
    if (error != nullptr) {
        *error = nullptr;
    }
    try {
        common_sampler_accept(smpl->smpl, token, is_generated != 0);
        return 0;
    } catch (const std::exception & e) {  // e.g. a grammar that cannot accept the token
        set_error(error, e.what());
    }
    return -1;
}

extern "C" int pyly_sampler_accept_prompt(pyly_sampler * smpl, const int * tokens, int n, char ** error) {
    if (error != nullptr) {
        *error = nullptr;
    }
    try {
        for (int i = 0; i < n; i++) {
            if (tokens[i] >= 0) {  // a media cell has no token to remember
                common_sampler_accept(smpl->smpl, tokens[i], false);
            }
        }
        return 0;
    } catch (const std::exception & e) {
        set_error(error, e.what());
    }
    return -1;
}

extern "C" int pyly_sampler_sample_accept_many(pyly_sampler ** smpls, void * ctx, const int * idxs, int n,
                                               int n_threads, int * tokens, int * status, char ** errors) {
    auto * lctx = static_cast<llama_context *>(ctx);
    // Synchronized once here, before the threads start: the sync common_sampler_sample makes for
    // each sampler then only stores the counters it finds at zero (the CPU backend has no queue).
    llama_synchronize(lctx);
    int n_failed = 0;
#ifdef PYLY_OPENMP
    const int team = std::max(1, std::min(n, n_threads));
#pragma omp parallel for num_threads(team) schedule(dynamic, 1) reduction(+ : n_failed)
#endif
    for (int i = 0; i < n; i++) {
        // no exception may leave an OpenMP region: each becomes this sampler's error
        tokens[i] = -1;
        status[i] = 0;
        errors[i] = nullptr;
        try {
            tokens[i] = sample_output(smpls[i]->smpl, lctx, idxs[i]);
        } catch (const std::exception & e) {
            status[i] = 1;
            set_error(&errors[i], e.what());
        }
        if (status[i] == 0) {
            try {
                common_sampler_accept(smpls[i]->smpl, tokens[i], true);
            } catch (const std::exception & e) {
                status[i] = 2;
                set_error(&errors[i], e.what());
            }
        }
        n_failed += status[i] != 0;
    }
    return n_failed;
}

extern "C" int pyly_decode_sample_accept_many(void * ctx, const void * batch, const int * doorbells, int n_doorbells,
                                              int * decode_code, pyly_sampler ** smpls, const int * idxs, int n,
                                              int n_threads, int * tokens, int * status, char ** errors) {
#ifndef _WIN32
    static const unsigned char ring[8] = {1, 0, 0, 0, 0, 0, 0, 0};  // an eventfd's 1
    for (int i = 0; i < n_doorbells; i++) {
        (void) !write(doorbells[i], ring, sizeof ring);  // a full pipe has been rung already
    }
#else
    (void) doorbells; (void) n_doorbells;
#endif
    auto * lctx = static_cast<llama_context *>(ctx);
    *decode_code = llama_decode(lctx, *static_cast<const llama_batch *>(batch));
    if (*decode_code != 0) {
        return 0;
    }
    if (n == 0) {  // nothing to sample: the outputs are synchronized all the same
        llama_synchronize(lctx);
        return 0;
    }
    return pyly_sampler_sample_accept_many(smpls, ctx, idxs, n, n_threads, tokens, status, errors);
}

extern "C" int pyly_sampler_candidates(pyly_sampler * smpl, int n, int * ids, float * probs, float * p_selected) {
    const llama_token_data_array * cur = common_sampler_get_candidates(smpl->smpl, true);
    *p_selected = cur->selected >= 0 ? cur->data[cur->selected].p : 1.0f;
    int k = 0;
    for (; k < n && static_cast<size_t>(k) < cur->size; k++) {
        ids[k] = cur->data[k].id;
        probs[k] = cur->data[k].p;
    }
    return k;
}

extern "C" char * pyly_json_schema_to_grammar(const char * schema_json, char ** error) {
    return guarded(error, [&] { return json_schema_to_grammar(common_json::parse(schema_json)); });
}

struct pyly_chat {
    common_chat_templates_ptr tmpls;
};

extern "C" pyly_chat * pyly_chat_init(const void * model, const char * template_override, char ** error) {
    if (error != nullptr) {
        *error = nullptr;
    }
    try {
        auto tmpls = common_chat_templates_init(static_cast<const llama_model *>(model),
                                                template_override != nullptr ? template_override : "");
        return new pyly_chat{std::move(tmpls)};
    } catch (const std::exception & e) {
        set_error(error, e.what());
    }
    return nullptr;
}

extern "C" void pyly_chat_free(pyly_chat * chat) {
    delete chat;
}

extern "C" char * pyly_chat_info(pyly_chat * chat, char ** error) {
    return guarded(error, [&] {
        common_json caps = common_json::object();
        for (const auto & [name, value] : common_chat_templates_get_caps(chat->tmpls.get())) {
            caps[name] = value;
        }
        common_json out = common_json::object();
        out["source"] = common_chat_templates_source(chat->tmpls.get(), "");
        out["tool_use"] = common_chat_templates_source(chat->tmpls.get(), "tool_use");
        out["caps"] = caps;
        out["supports_thinking"] = common_chat_templates_support_enable_thinking(chat->tmpls.get());
        return out.dump();
    });
}

extern "C" char * pyly_chat_apply(pyly_chat * chat, const char * inputs_json, char ** error) {
    return guarded(error, [&] {
        const auto j = common_json::parse(inputs_json);
        common_chat_templates_inputs in;
        in.messages = common_chat_msgs_parse_oaicompat(j.at("messages"));
        if (j.contains("tools") && !j.at("tools").is_null()) {
            in.tools = common_chat_tools_parse_oaicompat(j.at("tools"));
        }
        in.tool_choice = common_chat_tool_choice_parse_oaicompat(j.value("tool_choice", std::string("auto")));
        in.json_schema = j.value("json_schema", std::string());
        in.grammar = j.value("grammar", std::string());
        in.use_jinja = j.value("use_jinja", true);
        in.parallel_tool_calls = j.value("parallel_tool_calls", false);
        in.add_generation_prompt = j.value("add_generation_prompt", true);
        if (j.contains("continue_final_message")) {
            in.continue_final_message = common_chat_continuation_parse(j.at("continue_final_message"));
        }
        in.reasoning_format = common_reasoning_format_from_name(j.value("reasoning_format", std::string("none")));
        in.enable_thinking = j.value("enable_thinking", true);
        if (j.contains("chat_template_kwargs")) {
            for (const auto & item : j.at("chat_template_kwargs").items()) {
                in.chat_template_kwargs[item.key()] = item.value().get<std::string>();
            }
        }
        const common_chat_params p = common_chat_templates_apply(chat->tmpls.get(), in);
        common_json triggers = common_json::array();
        for (const auto & t : p.grammar_triggers) {
            common_json tj = common_json::object();
            tj["type"] = static_cast<int>(t.type);
            tj["value"] = t.value;
            tj["token"] = static_cast<int>(t.token);
            triggers.push_back(tj);
        }
        common_json out = common_json::object();
        out["prompt"] = p.prompt;
        out["format"] = static_cast<int>(p.format);
        out["format_name"] = common_chat_format_name(p.format);
        out["grammar"] = p.grammar;
        out["grammar_lazy"] = p.grammar_lazy;
        out["grammar_triggers"] = triggers;
        out["preserved_tokens"] = p.preserved_tokens;
        out["additional_stops"] = p.additional_stops;
        out["parser"] = p.parser;
        out["generation_prompt"] = p.generation_prompt;
        out["supports_thinking"] = p.supports_thinking;
        out["thinking_start_tag"] = p.thinking_start_tag;
        out["thinking_end_tags"] = p.thinking_end_tags;
        return out.dump();
    });
}

struct pyly_chat_parser {
    common_chat_parser_params params;
};

extern "C" pyly_chat_parser * pyly_chat_parser_init(const char * params_json, char ** error) {
    if (error != nullptr) {
        *error = nullptr;
    }
    try {
        const auto j = common_json::parse(params_json);
        auto parser = std::make_unique<pyly_chat_parser>();
        common_chat_parser_params & pp = parser->params;
        pp.format = static_cast<common_chat_format>(j.value("format", 0));
        pp.reasoning_format = common_reasoning_format_from_name(j.value("reasoning_format", std::string("none")));
        pp.reasoning_in_content = j.value("reasoning_in_content", false);
        pp.generation_prompt = j.value("generation_prompt", std::string());
        pp.parse_tool_calls = j.value("parse_tool_calls", true);
        pp.is_continuation = j.value("is_continuation", false);
        const std::string peg = j.value("parser", std::string());
        if (!peg.empty()) {
            pp.parser.load(peg);
        }
        return parser.release();
    } catch (const std::exception & e) {
        set_error(error, e.what());
    }
    return nullptr;
}

extern "C" void pyly_chat_parser_free(pyly_chat_parser * parser) {
    delete parser;
}

extern "C" char * pyly_chat_parser_parse(pyly_chat_parser * parser, const char * text, int is_partial, char ** error) {
    return guarded(error, [&] {
        const common_chat_msg msg = common_chat_parse(text, is_partial != 0, parser->params);
        common_json calls = common_json::array();
        for (const auto & c : msg.tool_calls) {
            common_json cj = common_json::object();
            cj["name"] = c.name;
            cj["arguments"] = c.arguments;
            cj["id"] = c.id;
            calls.push_back(cj);
        }
        common_json out = common_json::object();
        out["role"] = msg.role.empty() ? std::string("assistant") : msg.role;
        out["content"] = msg.content;
        out["reasoning_content"] = msg.reasoning_content;
        out["tool_calls"] = calls;
        return out.dump();
    });
}

extern "C" void pyly_free(void * ptr) {
    std::free(ptr);
}
