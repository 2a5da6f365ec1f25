// The CUDA check's harness (native/gpu/README.md): runs Ponder's KV policies over the patched llama.cpp API (0001
// eviction and read-outs, 0002/0006 attention scores, 0007 retention gates and value norms, state save and restore),
// greedy, at a budget, with flash attention on and off and every layer offloaded, and reports per run the live cells,
// evictions, prune rounds, the generated token ids (a hash and the first 32) and decode tokens/s, the ratio of each
// policy's speed to Full's, and whether the tokens match a reference file written by the same harness on the CPU.
//
// The rounds follow main/engine/pruning/KvController.ts (prune every 16 generated tokens down to the budget less 16, prompt
// chunks with rounds between them) and each policy's ranking follows main/engine/policies/ in its `aggregate` combine
// mode (TRIM-KV: the max of the gates' log beta, which its `union` mode frees alike): the same reads of the patched API
// and the same choices (choices.h), written again in C++ because no Node runs on the GPU machine. The runs are checked
// against themselves (GPU against CPU); the choices against the app's policies on recorded snapshots (choose.cpp).
// trimkv@heads runs TRIM-KV on per-head cells (0015: single KV heads moved between cells), each (layer, KV head)
// keeping its own tokens as main/engine/pruning/headRound.ts does.
//
//   ponder-gpu-harness --model FILE [--name NAME] [--gates FILE] [--policies LIST] [--flash on|off|both]
//                      [--prompt-tokens P] [--tokens N] [--cells C] [--budget B] [--prune-every K] [--threads T]
//                      [--results FILE] [--reference FILE] [--record FILE]
//   ponder-gpu-harness --quantize IN OUT q4_0|q8_0
#include "llama.h"
#include "llama-ext.h"

#include "choices.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace ponder;
static_assert(std::is_same<llama_pos, int32_t>::value, "choices.h keeps positions as int32_t, llama_pos");

struct options {
    std::string model;
    std::string name;
    std::string gates;
    std::vector<std::string> policies = {"full", "streamingllm", "h2o", "lethe", "refreekv", "leankv", "lava", "trimkv", "h2o@state", "trimkv@heads"};
    std::vector<bool> flash = {false, true};
    int prompt_tokens = 64;
    int tokens = 256;
    int cells = 0;      // Full's context: 0 = prompt + tokens
    int budget = 128;   // the policies' cells
    int prune_every = 16;
    int threads = 0;
    std::string results;
    std::string reference;
    std::string record; // every round's snapshot and target, as choose.cpp reads them (choices.h, "snapshot files")
};

// one run's figures, a row of the results file
struct run_result {
    std::string model;
    int cells = 0;
    int budget = 0;
    bool flash = false;
    std::string policy;
    std::string kv = "f16/f16";
    int live = 0;
    int peak = 0;
    int64_t evicted = 0;
    int rounds = 0;
    int64_t moves = 0; // per-head cells: the head contents moved between cells
    double tok_s = 0;
    double prune_ms = 0;
    std::vector<llama_token> ids;
    std::string note;

    std::string key() const {
        return model + "\t" + std::to_string(cells) + "\t" + std::to_string(budget) + "\t" + (flash ? "on" : "off") + "\t" + policy;
    }
};

uint64_t fnv1a(const std::vector<llama_token> & ids) {
    uint64_t h = 1469598103934665603ULL;
    for (llama_token id : ids) {
        for (int b = 0; b < 4; b++) {
            h ^= (uint64_t) ((uint32_t) id >> (8 * b) & 0xff);
            h *= 1099511628211ULL;
        }
    }
    return h;
}

std::string join_ids(const std::vector<llama_token> & ids, size_t count) {
    std::string out;
    for (size_t i = 0; i < std::min(count, ids.size()); i++)
        out += (i > 0 ? "," : "") + std::to_string(ids[i]);
    return out;
}

std::vector<std::string> split(const std::string & text, char sep) {
    std::vector<std::string> out;
    std::stringstream stream(text);
    std::string item;
    while (std::getline(stream, item, sep))
        out.push_back(item);
    return out;
}

struct policy_spec {
    bool scores = false;
    int rows = 1;
    float gamma = 1.0f;
    bool retention = false;
    bool value_norms = false;
    bool k8v4 = false;
};


policy_spec spec_of(const std::string & policy, bool flash) {
    policy_spec spec;
    const int all_rows = 512;                    // scoring.ts
    const int all_rows_flash = flash ? 32 : 512; // bounded with flash attention unless the policy needs every row
    if (policy == "h2o") {
        spec = {true, all_rows_flash, 1.0f};
    } else if (policy == "lethe") {
        spec = {true, all_rows_flash, 0.95f};
    } else if (policy == "refreekv") {
        spec = {true, 1, 1.0f};
    } else if (policy == "leankv") {
        spec = {true, all_rows, 1.0f};
        spec.k8v4 = flash; // llama.cpp keeps a quantized V cache only with flash attention
    } else if (policy == "lava") {
        spec = {true, std::min(32, all_rows_flash), 1.0f - 1.0f / 32.0f};
        spec.value_norms = true;
    } else if (policy == "trimkv") {
        spec.retention = true;
    } else if (policy != "full" && policy != "streamingllm") {
        fail("unknown policy " + policy);
    }
    return spec;
}


// ---- the engine side: a context per run ----

struct session {
    llama_model * model = nullptr;
    const llama_vocab * vocab = nullptr;
    llama_context * ctx = nullptr;
    int n_vocab = 0;
    int n_layer = 0;
};

llama_token argmax(llama_context * ctx, int idx, int n_vocab) {
    const float * logits = llama_get_logits_ith(ctx, idx);
    if (logits == nullptr)
        fail("no logits");
    int best = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

// decodes tokens at consecutive positions from `pos`; returns the greedy next token after the last one
llama_token decode_tokens(session & se, const llama_token * tokens, int count, llama_pos pos) {
    llama_batch batch = llama_batch_init(count, 0, 1);
    for (int i = 0; i < count; i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = pos + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i == count - 1;
    }
    batch.n_tokens = count;
    const int rc = llama_decode(se.ctx, batch);
    llama_batch_free(batch);
    if (rc != 0)
        fail("llama_decode returned " + std::to_string(rc) + " at position " + std::to_string(pos));
    return argmax(se.ctx, count - 1, se.n_vocab);
}

snapshot read_snapshot(session & se, const policy_spec & spec) {
    snapshot s;
    llama_memory_t mem = llama_get_memory(se.ctx);
    const int used = llama_memory_n_cells_used(mem);
    s.layers = se.n_layer;
    std::vector<llama_pos> pos(std::max(1, used));
    const int n = llama_get_attn_score(se.ctx, 0, 0, pos.data(), nullptr, nullptr, (int) pos.size());
    if (n < 0)
        fail("llama_get_attn_score could not read the positions");
    pos.resize(n);
    s.pos = pos;
    auto same_cells = [&](const std::vector<llama_pos> & other, int got, const char * what) {
        if (got != n || !std::equal(pos.begin(), pos.end(), other.begin()))
            fail(std::string(what) + " listed other cells than the positions");
    };
    if (spec.scores) {
        for (int l = 0; l < s.layers; l++)
            s.heads = std::max(s.heads, llama_get_attn_score_n_head(se.ctx, l));
        s.accumulated.assign((size_t) s.layers * s.heads * n, 0.0f);
        s.last.assign((size_t) s.layers * s.heads * n, 0.0f);
        std::vector<float> acc, last;
        std::vector<llama_pos> p(std::max(1, n));
        for (int l = 0; l < s.layers; l++) {
            const int h = llama_get_attn_score_n_head(se.ctx, l);
            acc.assign((size_t) h * std::max(1, n), 0.0f);
            last.assign((size_t) h * std::max(1, n), 0.0f);
            const int got = llama_get_attn_score(se.ctx, l, 0, p.data(), acc.data(), last.data(), n);
            same_cells(p, got, "the scores");
            std::copy(acc.begin(), acc.begin() + (size_t) h * n, s.accumulated.begin() + (size_t) l * s.heads * n);
            std::copy(last.begin(), last.begin() + (size_t) h * n, s.last.begin() + (size_t) l * s.heads * n);
        }
    }
    if (spec.retention || spec.value_norms) {
        for (int l = 0; l < s.layers; l++)
            s.kv_heads = std::max(s.kv_heads, llama_get_kv_n_head(se.ctx, l));
        std::vector<float> values;
        std::vector<llama_pos> p(std::max(1, n));
        std::vector<float> & out = spec.retention ? s.log_beta : s.value_norms;
        out.assign((size_t) s.layers * s.kv_heads * n, spec.retention ? -INFINITY : 0.0f);
        for (int l = 0; l < s.layers; l++) {
            const int h = llama_get_kv_n_head(se.ctx, l);
            values.assign((size_t) h * std::max(1, n), 0.0f);
            const int got = spec.retention ? llama_get_retention(se.ctx, l, 0, p.data(), values.data(), n)
                                           : llama_get_value_norms(se.ctx, l, 0, p.data(), values.data(), n);
            same_cells(p, got, spec.retention ? "the retention" : "the value norms");
            for (size_t i = 0; i < (size_t) h * n; i++)
                out[(size_t) l * s.kv_heads * n + i] = spec.retention ? (float) log_sigmoid(values[i]) : values[i];
        }
    }
    // cells in position order: a round's choice (ties, sums) then does not depend on where llama.cpp put the cells, which
    // a restored state changes
    const std::vector<int> order = order_by_position(s.pos);
    auto permute = [&](std::vector<float> & values) {
        if (values.empty() || n == 0)
            return;
        const size_t rows = values.size() / n;
        std::vector<float> out(values.size());
        for (size_t r = 0; r < rows; r++)
            for (int j = 0; j < n; j++)
                out[r * n + j] = values[r * n + order[j]];
        values.swap(out);
    };
    permute(s.accumulated);
    permute(s.last);
    permute(s.log_beta);
    permute(s.value_norms);
    for (int j = 0; j < n; j++)
        s.pos[j] = pos[order[j]];
    return s;
}

// what a saved state keeps besides llama.cpp's sequence state: the per-cell values the patches add
struct saved_state {
    std::vector<uint8_t> seq;
    std::vector<llama_pos> pos;
    std::vector<std::vector<float>> acc, last, values;
};

saved_state save_state(session & se, const policy_spec & spec) {
    saved_state st;
    st.seq.resize(llama_state_seq_get_size(se.ctx, 0));
    if (llama_state_seq_get_data(se.ctx, st.seq.data(), st.seq.size(), 0) != st.seq.size())
        fail("llama_state_seq_get_data failed");
    const int used = llama_memory_n_cells_used(llama_get_memory(se.ctx));
    st.pos.resize(std::max(1, used));
    const int n = llama_get_attn_score(se.ctx, 0, 0, st.pos.data(), nullptr, nullptr, (int) st.pos.size());
    st.pos.resize(n);
    for (int l = 0; l < se.n_layer; l++) {
        std::vector<llama_pos> p(std::max(1, n));
        if (spec.scores) {
            const int h = llama_get_attn_score_n_head(se.ctx, l);
            st.acc.emplace_back((size_t) h * std::max(1, n));
            st.last.emplace_back((size_t) h * std::max(1, n));
            llama_get_attn_score(se.ctx, l, 0, p.data(), st.acc.back().data(), st.last.back().data(), n);
        }
        if (spec.retention || spec.value_norms) {
            st.values.emplace_back((size_t) llama_get_kv_n_head(se.ctx, l) * std::max(1, n));
            if (spec.retention)
                llama_get_retention(se.ctx, l, 0, p.data(), st.values.back().data(), n);
            else
                llama_get_value_norms(se.ctx, l, 0, p.data(), st.values.back().data(), n);
        }
    }
    return st;
}

// clears the cache, restores the sequence and writes the per-cell values back (what SequenceStates does in the app)
void restore_state(session & se, const policy_spec & spec, const saved_state & st) {
    llama_memory_clear(llama_get_memory(se.ctx), true);
    if (llama_state_seq_set_data(se.ctx, st.seq.data(), st.seq.size(), 0) == 0)
        fail("llama_state_seq_set_data failed");
    const int n = (int) st.pos.size();
    for (int l = 0; l < se.n_layer; l++) {
        if (spec.scores && llama_set_attn_score_cells(se.ctx, l, 0, st.pos.data(), st.acc[l].data(), st.last[l].data(), n) != n)
            fail("llama_set_attn_score_cells did not write every cell");
        if (spec.retention && llama_set_retention_cells(se.ctx, l, 0, st.pos.data(), st.values[l].data(), n) != n)
            fail("llama_set_retention_cells did not write every cell");
        if (spec.value_norms && llama_set_value_norm_cells(se.ctx, l, 0, st.pos.data(), st.values[l].data(), n) != n)
            fail("llama_set_value_norm_cells did not write every cell");
    }
    // the restored cache must hold what was saved: the same positions, and per position the same scores and values, bit
    // for bit (where the cells lie may change, and with it the rounding of the next tokens' attention)
    const saved_state back = save_state(se, spec);
    std::vector<llama_pos> a = st.pos, b = back.pos;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b)
        fail("the restored state holds other positions than the saved one");
    std::map<llama_pos, int> at;
    for (int j = 0; j < n; j++)
        at[back.pos[j]] = j;
    auto same = [&](const std::vector<std::vector<float>> & x, const std::vector<std::vector<float>> & y, const char * what) {
        for (size_t l = 0; l < x.size(); l++) {
            const size_t heads = n > 0 ? x[l].size() / n : 0;
            for (size_t h = 0; h < heads; h++)
                for (int j = 0; j < n; j++)
                    if (std::memcmp(&x[l][h * n + j], &y[l][h * n + at[st.pos[j]]], sizeof(float)) != 0)
                        fail(std::string("restored ") + what + " differ from the saved ones at layer " + std::to_string(l));
        }
    };
    same(st.acc, back.acc, "accumulated scores");
    same(st.last, back.last, "last scores");
    same(st.values, back.values, spec.retention ? "gate logits" : "value norms");
}

// ---- per-head cells (trimkv@heads): main/engine/pruning/headRound.ts and HeadSlots.ts ----
// Each (layer, KV head) keeps its own top tokens by (t - pos) * log beta, pinned first (position 0 and the 8 newest); the
// cells most heads keep stay, each head's kept tokens outside them move into its holes (patch 0015), the rest are freed
// for every head. What the check asks of the GPU: the moves of K, V (rows, or transposed elements without flash
// attention) and the gates' logits on the device's buffers give the CPU's tokens.

struct head_table {
    std::map<int32_t, std::vector<int32_t>> moved; // slot -> the token of each layer * kv_heads + head

    int32_t token_at(int32_t slot, int pair) const {
        const auto it = moved.find(slot);
        return it == moved.end() ? slot : it->second[pair];
    }
};

// one round on per-head cells; returns the cells freed and adds the head moves made to `moves_made`
int prune_heads(llama_memory_t mem, const snapshot & s, const round_target & target, head_table & table, int64_t & moves_made) {
    const int n = s.n();
    const int pairs = s.layers * s.kv_heads;
    const int count = std::min(n, target.max_keep);
    if (n <= count)
        return 0;
    const int newest = std::max(1, std::min(8, count - 1));
    std::vector<uint8_t> pinned(n, 0);
    pinned[0] = 1;
    for (int j = std::max(1, n - newest); j < n; j++)
        pinned[j] = 1;

    std::vector<std::vector<uint8_t>> kept(pairs, std::vector<uint8_t>(n, 0));
    std::vector<int> kept_by(n, 0);
    std::vector<int32_t> held(n);
    for (int p = 0; p < pairs; p++) {
        for (int j = 0; j < n; j++)
            held[j] = table.token_at(s.pos[j], p);
        const std::vector<float> log_beta(s.log_beta.begin() + (size_t) p * n, s.log_beta.begin() + (size_t) (p + 1) * n);
        const std::vector<double> value = decayed_retention(log_beta, held, retention_step(held, target.tokens_seen));
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        // a pinned cell holds its own token in every head (it is never a hole, and never moved out)
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pinned[a] != pinned[b] ? pinned[a] > pinned[b] : value[a] > value[b]; });
        for (int i = 0; i < count; i++) {
            kept[p][order[i]] = 1;
            kept_by[order[i]]++;
        }
    }
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pinned[a] != pinned[b] ? pinned[a] > pinned[b] : kept_by[a] > kept_by[b]; });
    std::vector<uint8_t> in_set(n, 0);
    for (int i = 0; i < count; i++)
        in_set[order[i]] = 1;

    std::vector<int32_t> moves;
    for (int p = 0; p < pairs; p++) {
        std::vector<int> holes, outside;
        for (int j = 0; j < n; j++) {
            if (in_set[j] && !kept[p][j])
                holes.push_back(j);
            if (!in_set[j] && kept[p][j])
                outside.push_back(j);
        }
        for (size_t i = 0; i < outside.size(); i++)
            moves.insert(moves.end(), {p / s.kv_heads, p % s.kv_heads, s.pos[outside[i]], s.pos[holes[i]]});
    }
    const int n_moves = (int) moves.size() / 4;
    if (n_moves > 0) {
        const int32_t rc = llama_memory_seq_move_head_cells(mem, 0, moves.data(), n_moves);
        if (rc < 0)
            fail("llama_memory_seq_move_head_cells refused (" + std::to_string(rc) + ")");
        std::vector<int32_t> sources(n_moves);
        for (int i = 0; i < n_moves; i++)
            sources[i] = table.token_at(moves[4 * i + 2], moves[4 * i] * s.kv_heads + moves[4 * i + 1]);
        for (int i = 0; i < n_moves; i++) {
            const int32_t to = moves[4 * i + 3];
            auto it = table.moved.find(to);
            if (it == table.moved.end())
                it = table.moved.emplace(to, std::vector<int32_t>(pairs, to)).first;
            it->second[moves[4 * i] * s.kv_heads + moves[4 * i + 1]] = sources[i];
        }
        moves_made += n_moves;
    }
    std::vector<llama_pos> free;
    for (int j = 0; j < n; j++)
        if (!in_set[j]) {
            free.push_back(s.pos[j]);
            table.moved.erase(s.pos[j]);
        }
    const int32_t removed = llama_memory_seq_rm_pos(mem, 0, free.data(), free.size());
    if (removed < 0)
        fail("llama_memory_seq_rm_pos refused");
    return removed;
}

run_result run_policy(llama_model * model, const options & opt, const std::string & policy_arg, bool flash, const std::vector<llama_token> & prompt,
        FILE * record) {
    const auto variant = [&](const char * tail) {
        const size_t k = std::strlen(tail);
        return policy_arg.size() > k && policy_arg.compare(policy_arg.size() - k, k, tail) == 0;
    };
    const bool state_check = variant("@state");
    const bool per_head = variant("@heads");
    const std::string policy = state_check || per_head ? policy_arg.substr(0, policy_arg.find('@')) : policy_arg;
    if (per_head && policy != "trimkv")
        fail("per-head cells run TRIM-KV here (trimkv@heads), not " + policy);
    const policy_spec spec = spec_of(policy, flash);
    const bool full = policy == "full";
    const int full_cells = opt.cells > 0 ? opt.cells : (int) prompt.size() + opt.tokens;

    run_result r;
    r.model = opt.name;
    r.cells = full_cells;
    r.budget = full ? full_cells : opt.budget;
    r.flash = flash;
    r.policy = policy_arg;

    session se;
    se.model = model;
    se.vocab = llama_model_get_vocab(model);
    se.n_vocab = llama_vocab_n_tokens(se.vocab);
    se.n_layer = llama_model_n_layer(model);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) r.budget;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = opt.threads;
    cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.offload_kqv = true;
    cp.no_perf = true;
    if (spec.k8v4) {
        cp.type_k = GGML_TYPE_Q8_0;
        cp.type_v = GGML_TYPE_Q4_0;
        r.kv = "q8_0/q4_0";
    }
    se.ctx = llama_init_from_model(model, cp);
    if (se.ctx == nullptr)
        fail("llama_init_from_model failed for " + policy_arg);
    try {
        if (spec.scores && !llama_set_attn_score(se.ctx, true, (uint32_t) spec.rows, false, spec.gamma))
            fail("llama_set_attn_score refused");
        if (spec.retention) {
            if (opt.gates.empty())
                fail("TRIM-KV needs --gates");
            char err[512] = {0};
            if (llama_set_retention_gates(se.ctx, opt.gates.c_str(), err, sizeof(err)) != 0)
                fail(std::string("llama_set_retention_gates: ") + err);
        }
        if (spec.value_norms && !llama_set_value_norms(se.ctx, true))
            fail("llama_set_value_norms refused");

        llama_memory_t mem = llama_get_memory(se.ctx);
        policy_state state;
        head_table table;
        const int budget = r.budget;
        const int decode_room = std::max(1, std::min(opt.prune_every, budget / 2));
        const int input_room = std::max(decode_room, std::min(512, (int) std::floor(budget * 0.3)));
        double prune_ms = 0;
        auto prune = [&](int max_keep, const char * phase, int64_t seen) {
            const auto started = std::chrono::steady_clock::now();
            const snapshot s = read_snapshot(se, spec);
            round_target target;
            target.max_keep = max_keep;
            target.phase = phase;
            target.input_end = (int) prompt.size();
            target.tokens_seen = seen;
            if (record != nullptr && !per_head) // snapshot files hold shared-cell rounds (choose.cpp)
                write_round(record, policy, s, target);
            r.rounds++;
            if (per_head) {
                r.evicted += prune_heads(mem, s, target, table, r.moves);
                prune_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
                return;
            }
            const std::vector<llama_pos> evict = decide(policy, s, target, state);
            if (!evict.empty()) {
                const int32_t removed = llama_memory_seq_rm_pos(mem, 0, evict.data(), evict.size());
                if (removed < 0)
                    fail("llama_memory_seq_rm_pos refused");
                r.evicted += removed;
            }
            prune_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
        };

        // the prompt, in chunks; rounds between them keep it within the budget (KvController's input rounds)
        llama_pos pos = 0;
        llama_token next = 0;
        while (pos < (llama_pos) prompt.size()) {
            int count = std::min<int>((int) prompt.size() - pos, full ? 512 : std::min(512, input_room));
            if (!full) {
                const int live = llama_memory_n_cells_used(mem);
                if (budget - live < count)
                    prune(budget - input_room, "prefill-chunk", pos);
                count = std::min(count, budget - llama_memory_n_cells_used(mem));
                if (count < 1)
                    fail("a prompt round left no room within the budget");
            }
            next = decode_tokens(se, prompt.data() + pos, count, pos);
            pos += count;
            r.peak = std::max(r.peak, llama_memory_n_cells_used(mem));
        }

        // the answer, greedy; a round every prune_every tokens, and whenever the budget is full
        bool after_prefill_due = policy == "refreekv";
        int since_round = 0;
        prune_ms = 0;
        const auto started = std::chrono::steady_clock::now();
        for (int i = 0; i < opt.tokens; i++) {
            r.ids.push_back(next);
            if (state_check && i == opt.tokens / 2)
                restore_state(se, spec, save_state(se, spec));
            if (!full) {
                const int live = llama_memory_n_cells_used(mem);
                if (after_prefill_due || since_round >= opt.prune_every || budget - live < 1) {
                    prune(budget - decode_room, after_prefill_due ? "after-prefill" : "decode", pos);
                    after_prefill_due = false;
                    since_round = 0;
                }
                since_round++;
            } else if (llama_memory_n_cells_used(mem) >= budget) {
                fail("Full ran out of cells: raise --cells");
            }
            next = decode_tokens(se, &next, 1, pos);
            pos++;
            r.peak = std::max(r.peak, llama_memory_n_cells_used(mem));
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        r.tok_s = opt.tokens / seconds;
        r.prune_ms = prune_ms;
        r.live = llama_memory_n_cells_used(mem);
    } catch (...) {
        llama_free(se.ctx);
        throw;
    }
    llama_free(se.ctx);
    return r;
}

// ---- the prompt ----

std::vector<llama_token> make_prompt(llama_model * model, int count) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const std::string text =
        "Question: A train leaves at nine and travels at sixty miles an hour. A second train leaves an hour later at eighty "
        "miles an hour on the same track. When does the second train catch up with the first, and how far have both gone? "
        "Think it through step by step before you answer. ";
    std::string all;
    std::vector<llama_token> tokens;
    while ((int) tokens.size() < count) {
        all += text;
        tokens.assign(all.size() + 16, 0);
        const int n = llama_tokenize(vocab, all.c_str(), (int32_t) all.size(), tokens.data(), (int32_t) tokens.size(), true, false);
        if (n < 0)
            fail("llama_tokenize failed");
        tokens.resize(n);
    }
    tokens.resize(count);
    return tokens;
}

// ---- output ----

const char * results_header = "model\tcells\tbudget\tflash\tpolicy\tkv\tlive\tpeak\tevicted\trounds\ttok_s\tprune_ms\thash\tids";

std::string result_row(const run_result & r) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "\t%s\t%d\t%d\t%" PRId64 "\t%d\t%.2f\t%.1f\t%016" PRIx64 "\t", r.kv.c_str(), r.live, r.peak,
        r.evicted, r.rounds, r.tok_s, r.prune_ms, fnv1a(r.ids));
    return r.key() + buf + join_ids(r.ids, r.ids.size());
}

struct reference_row {
    std::string kv;
    int live = 0;
    int64_t evicted = 0;
    int rounds = 0;
    std::vector<llama_token> ids;
};

std::map<std::string, reference_row> read_reference(const std::string & file) {
    std::map<std::string, reference_row> rows;
    std::ifstream in(file);
    if (!in)
        fail("cannot read the reference " + file);
    std::string line;
    while (std::getline(in, line)) {
        const std::vector<std::string> f = split(line, '\t');
        if (f.size() < 14 || f[0] == "model")
            continue;
        reference_row row;
        row.kv = f[5];
        row.live = std::atoi(f[6].c_str());
        row.evicted = std::atoll(f[8].c_str());
        row.rounds = std::atoi(f[9].c_str());
        for (const std::string & id : split(f[13], ','))
            row.ids.push_back(std::atoi(id.c_str()));
        rows[f[0] + "\t" + f[1] + "\t" + f[2] + "\t" + f[3] + "\t" + f[4]] = row;
    }
    return rows;
}

std::string compare(const run_result & r, const std::map<std::string, reference_row> & reference) {
    const auto it = reference.find(r.key());
    if (it == reference.end())
        return "no reference";
    const reference_row & ref = it->second;
    size_t first = 0;
    while (first < r.ids.size() && first < ref.ids.size() && r.ids[first] == ref.ids[first])
        first++;
    std::string out = first == r.ids.size() && first == ref.ids.size() ? "same tokens"
        : "differs at token " + std::to_string(first) + " of " + std::to_string(r.ids.size());
    if (ref.live != r.live || ref.evicted != r.evicted || ref.rounds != r.rounds)
        out += " (reference: live " + std::to_string(ref.live) + ", evicted " + std::to_string(ref.evicted) + ", rounds " +
            std::to_string(ref.rounds) + ")";
    return out;
}

void print_table(const std::vector<run_result> & runs) {
    std::printf("\n| model | cells | flash attn | policy | KV | budget | live | evicted | rounds | tok/s | vs Full | prune ms | hash | vs CPU reference |\n");
    std::printf("|---|--:|:-:|---|---|--:|--:|--:|--:|--:|--:|--:|---|---|\n");
    for (const run_result & r : runs) {
        double full = 0;
        for (const run_result & f : runs)
            if (f.policy == "full" && f.model == r.model && f.cells == r.cells && f.flash == r.flash)
                full = f.tok_s;
        char ratio[32] = "-";
        if (full > 0)
            std::snprintf(ratio, sizeof(ratio), "%.3f", r.tok_s / full);
        std::printf("| %s | %d | %s | %s | %s | %d | %d | %" PRId64 " | %d | %.1f | %s | %.1f | %016" PRIx64 " | %s |\n", r.model.c_str(),
            r.cells, r.flash ? "on" : "off", r.policy.c_str(), r.kv.c_str(), r.budget, r.live, r.evicted, r.rounds, r.tok_s, ratio,
            r.prune_ms, fnv1a(r.ids), r.note.c_str());
    }
}

int quantize(const std::string & in, const std::string & out, const std::string & type) {
    llama_model_quantize_params params = llama_model_quantize_default_params();
    if (type == "q4_0")
        params.ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
    else if (type == "q8_0")
        params.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    else
        fail("--quantize takes q4_0 or q8_0");
    if (llama_model_quantize(in.c_str(), out.c_str(), &params) != 0)
        fail("llama_model_quantize failed");
    return 0;
}

options parse(int argc, char ** argv) {
    options opt;
    auto value = [&](int & i) -> std::string {
        if (i + 1 >= argc)
            fail(std::string(argv[i]) + " needs a value");
        return argv[++i];
    };
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--model") opt.model = value(i);
        else if (arg == "--name") opt.name = value(i);
        else if (arg == "--gates") opt.gates = value(i);
        else if (arg == "--policies") opt.policies = split(value(i), ',');
        else if (arg == "--flash") {
            const std::string v = value(i);
            opt.flash = v == "on" ? std::vector<bool>{true} : v == "off" ? std::vector<bool>{false} : std::vector<bool>{false, true};
        }
        else if (arg == "--prompt-tokens") opt.prompt_tokens = std::atoi(value(i).c_str());
        else if (arg == "--tokens") opt.tokens = std::atoi(value(i).c_str());
        else if (arg == "--cells") opt.cells = std::atoi(value(i).c_str());
        else if (arg == "--budget") opt.budget = std::atoi(value(i).c_str());
        else if (arg == "--prune-every") opt.prune_every = std::atoi(value(i).c_str());
        else if (arg == "--threads") opt.threads = std::atoi(value(i).c_str());
        else if (arg == "--results") opt.results = value(i);
        else if (arg == "--reference") opt.reference = value(i);
        else if (arg == "--record") opt.record = value(i);
        else fail("unknown argument " + arg);
    }
    if (opt.model.empty())
        fail("--model is required");
    if (opt.name.empty()) {
        opt.name = opt.model.substr(opt.model.find_last_of('/') + 1);
        opt.name = opt.name.substr(0, opt.name.find(".gguf"));
    }
    if (opt.threads <= 0)
        opt.threads = (int) std::max(1u, std::thread::hardware_concurrency());
    return opt;
}

void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN)
        std::fputs(text, stderr);
}

} // namespace

int main(int argc, char ** argv) {
    try {
        llama_log_set(quiet_log, nullptr);
        llama_backend_init();
        if (argc == 5 && std::string(argv[1]) == "--quantize")
            return quantize(argv[2], argv[3], argv[4]);
        const options opt = parse(argc, argv);

        llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = 999; // every layer offloaded (the CPU build has no device to put them on)
        mp.progress_callback = [](float, void *) { return true; }; // no progress dots
        llama_model * model = llama_model_load_from_file(opt.model.c_str(), mp);
        if (model == nullptr)
            fail("cannot load " + opt.model);
        std::vector<std::string> devices;
        for (size_t i = 0; i < ggml_backend_dev_count(); i++)
            devices.push_back(ggml_backend_dev_description(ggml_backend_dev_get(i)));
        std::printf("# %s: %d layers, devices:", opt.name.c_str(), llama_model_n_layer(model));
        for (const std::string & d : devices)
            std::printf(" [%s]", d.c_str());
        std::printf("\n# prompt %d tokens, %d generated, budget %d, prune every %d, %d threads\n", opt.prompt_tokens, opt.tokens,
            opt.budget, opt.prune_every, opt.threads);

        const std::vector<llama_token> prompt = make_prompt(model, opt.prompt_tokens);
        std::map<std::string, reference_row> reference;
        if (!opt.reference.empty())
            reference = read_reference(opt.reference);
        FILE * results = nullptr;
        if (!opt.results.empty()) {
            const bool fresh = !std::ifstream(opt.results).good();
            results = std::fopen(opt.results.c_str(), "a");
            if (results == nullptr)
                fail("cannot write " + opt.results);
            if (fresh)
                std::fprintf(results, "%s\n", results_header);
        }

        // a first decode pays for loading and repacking the weights: one short untimed run before the measured ones
        options warm = opt;
        warm.tokens = std::min(opt.tokens, 16);
        run_policy(model, warm, "full", opt.flash.front(), prompt, nullptr);
        FILE * record = nullptr;
        if (!opt.record.empty() && (record = std::fopen(opt.record.c_str(), "w")) == nullptr)
            fail("cannot write " + opt.record);

        std::vector<run_result> runs;
        bool mismatch = false;
        for (bool flash : opt.flash) {
            for (const std::string & policy : opt.policies) {
                run_result r = run_policy(model, opt, policy, flash, prompt, record);
                if (!opt.reference.empty()) {
                    r.note = compare(r, reference);
                    mismatch = mismatch || r.note.rfind("same tokens", 0) != 0;
                }
                const size_t at = policy.find('@');
                if (at != std::string::npos && policy.compare(at, std::string::npos, "@heads") == 0) {
                    // per-head cells keep other tokens than shared cells: the moves are the check, not the same tokens
                    r.note += std::string(r.note.empty() ? "" : "; ") + std::to_string(r.moves) + " head moves";
                } else if (at != std::string::npos) {
                    // a variant (h2o@state: a state saved, restored and checked halfway) against its plain run; its tokens
                    // may part from the plain run's where the restored cells' new places round the attention differently
                    for (const run_result & plain : runs) {
                        if (plain.policy == policy.substr(0, at) && plain.flash == flash) {
                            size_t first = 0;
                            while (first < r.ids.size() && first < plain.ids.size() && r.ids[first] == plain.ids[first])
                                first++;
                            r.note += std::string(r.note.empty() ? "" : "; ") + "restored at token " + std::to_string(opt.tokens / 2) + ", " +
                                (first == r.ids.size() ? "same tokens as " + plain.policy : "differs from " + plain.policy + " at token " + std::to_string(first));
                        }
                    }
                }
                std::printf("%s %s flash=%s: live %d, evicted %" PRId64 ", rounds %d, %.1f tok/s, hash %016" PRIx64 ", first 32: %s%s%s\n",
                    r.model.c_str(), r.policy.c_str(), flash ? "on" : "off", r.live, r.evicted, r.rounds, r.tok_s, fnv1a(r.ids),
                    join_ids(r.ids, 32).c_str(), r.note.empty() ? "" : " | ", r.note.c_str());
                std::fflush(stdout);
                if (results != nullptr) {
                    std::fprintf(results, "%s\n", result_row(r).c_str());
                    std::fflush(results);
                }
                runs.push_back(r);
            }
        }
        if (results != nullptr)
            std::fclose(results);
        if (record != nullptr)
            std::fclose(record);
        print_table(runs);
        llama_model_free(model);
        llama_backend_free();
        return mismatch ? 2 : 0;
    } catch (const std::exception & err) {
        std::fprintf(stderr, "ponder-gpu-harness: %s\n", err.what());
        return 1;
    }
}
