// The policies' choices in C++ (native/gpu/README.md): what main/engine/policies/ chooses in its `aggregate` combine
// mode, for a round's snapshot of the live cells, written again because no Node runs on the GPU machine. It reads no
// llama.cpp (positions are llama_pos, an int32_t): the harness (harness.cpp) reads the snapshots from the patched API
// and frees what `decide` returns, and choose.cpp runs it on snapshot files, which test/native/gpuChoices.test.ts holds
// against the TypeScript policies.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <istream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace ponder {

[[noreturn]] inline void fail(const std::string & message) {
    throw std::runtime_error(message);
}

// ---- the policies' arithmetic (main/engine/policies/scoreMath.ts) ----

// what a round reads: per layer and head, head-major, cells in the order llama.cpp lists them
struct snapshot {
    std::vector<int32_t> pos;
    int layers = 0;
    int heads = 0;                   // query heads (scores)
    std::vector<float> accumulated;  // layers * heads * n
    std::vector<float> last;
    int kv_heads = 0;                // retention and value norms
    std::vector<float> log_beta;     // layers * kv_heads * n (TRIM-KV)
    std::vector<float> value_norms;  // layers * kv_heads * n (LAVa)
    int n() const { return (int) pos.size(); }
};

inline std::vector<int> order_by_position(const std::vector<int32_t> & pos) {
    std::vector<int> order(pos.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pos[a] < pos[b]; });
    return order;
}

template <typename T>
std::vector<int> rank_descending(const T * values, int n) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[a] > values[b]; });
    return order;
}

// the `sinks` oldest, then the `recent` newest (newest first), then the rest by score (null: newest first)
template <typename T>
std::vector<int> structured_order(const std::vector<int> & by_pos, int sinks, int recent, const T * scores, int & structural) {
    const int n = (int) by_pos.size();
    std::vector<int> order;
    std::vector<uint8_t> taken(n, 0);
    for (int i = 0; i < std::min(sinks, n); i++) {
        order.push_back(by_pos[i]);
        taken[by_pos[i]] = 1;
    }
    for (int i = n - 1; i >= std::max(0, n - recent); i--) {
        if (!taken[by_pos[i]]) {
            order.push_back(by_pos[i]);
            taken[by_pos[i]] = 1;
        }
    }
    structural = (int) order.size();
    std::vector<int> rest;
    if (scores == nullptr)
        rest.assign(by_pos.rbegin(), by_pos.rend());
    else
        rest = rank_descending(scores, n);
    for (int j : rest) {
        if (!taken[j])
            order.push_back(j);
    }
    return order;
}

// each (layer, head) row divided by its total, summed over the included layers
inline std::vector<float> aggregate_normalised(const std::vector<float> & s, int layers, int heads, int n, int first_layer) {
    std::vector<float> out(n, 0.0f);
    for (int l = first_layer; l < layers; l++) {
        for (int h = 0; h < heads; h++) {
            const float * row = s.data() + ((size_t) l * heads + h) * n;
            double total = 0;
            for (int j = 0; j < n; j++)
                total += row[j];
            if (total <= 0)
                continue;
            for (int j = 0; j < n; j++)
                out[j] = (float) ((double) out[j] + row[j] / total);
        }
    }
    return out;
}

inline std::vector<float> max_over_rows(const std::vector<float> & s, int layers, int heads, int n, float floor) {
    std::vector<float> out(n, floor);
    for (int r = 0; r < layers * heads; r++) {
        for (int j = 0; j < n; j++)
            out[j] = std::max(out[j], s[(size_t) r * n + j]);
    }
    return out;
}

inline double retention_step(const std::vector<int32_t> & pos, int64_t tokens_seen) {
    int64_t newest = -1;
    for (int32_t p : pos)
        newest = std::max<int64_t>(newest, p);
    return (double) (std::max<int64_t>(newest + 1, tokens_seen) + 1);
}

inline std::vector<double> decayed_retention(const std::vector<float> & log_beta, const std::vector<int32_t> & pos, double t) {
    std::vector<double> out(pos.size());
    for (size_t j = 0; j < pos.size(); j++) {
        const double age = std::max(0.0, t - pos[j]);
        out[j] = age == 0 ? 0.0 : age * log_beta[j];
    }
    return out;
}

inline double log_sigmoid(double g) {
    return g >= 0 ? -std::log1p(std::exp(-g)) : g - std::log1p(std::exp(g));
}

// ---- the policies, each in its `aggregate` mode: one ranking of the cells (main/engine/policies/*.ts) ----

struct round_target {
    int max_keep = 0;
    const char * phase = "decode"; // "after-prefill", "prefill-chunk", "decode"
    int input_end = -1;
    int64_t tokens_seen = 0;
};

struct selection {
    std::vector<int> order;
    int quota = 0;
    std::vector<int> protect;
    int first_layer = 0; // layers below it do not vote (ReFreeKV's whole layers)
};

// lethe.ts's L_evict, carried from round to round
struct policy_state {
    double lethe_threshold = -1;
};

inline std::vector<int> protected_input(const std::vector<int32_t> & pos, const round_target & target, double share) {
    std::vector<int> cells;
    if (target.input_end < 0)
        return cells;
    for (int j = 0; j < (int) pos.size(); j++) {
        if (pos[j] < target.input_end)
            cells.push_back(j);
    }
    if (cells.empty() || cells.size() > share * target.max_keep)
        cells.clear();
    return cells;
}

// LAVa's aggregate row (lava.ts lavaAggregate): Eq. 5 scores, pooled by position, weighted by the layers' Eq. 7 entropies
inline std::vector<float> lava_aggregate(const snapshot & s, int window, int kernel) {
    const int n = s.n(), L = s.layers, H = s.heads, G = std::max(1, s.kv_heads);
    if (s.value_norms.size() != (size_t) L * G * n)
        fail("LAVa needs the value norms, and the round read none");
    std::vector<float> scores((size_t) L * G * n, 0.0f);
    for (int l = 0; l < L; l++) {
        std::vector<double> vmax(G, 0.0);
        for (int g = 0; g < G; g++)
            for (int j = 0; j < n; j++)
                vmax[g] = std::max(vmax[g], (double) s.value_norms[((size_t) l * G + g) * n + j]);
        const bool known = std::any_of(vmax.begin(), vmax.end(), [](double v) { return v > 0; });
        for (int q = 0; q < H; q++) {
            const int g = std::min(G - 1, (q * G) / H);
            const double weight = (known ? vmax[g] : 1.0) / std::max(1, window);
            for (int j = 0; j < n; j++) {
                float & to = scores[((size_t) l * G + g) * n + j];
                to = std::max(to, (float) (weight * s.accumulated[((size_t) l * H + q) * n + j]));
            }
        }
    }
    const std::vector<int> by_pos = order_by_position(s.pos);
    const int w = std::min(n, std::max(0, window));
    std::vector<uint8_t> candidate(n, 0);
    for (int i = 0; i < n - w; i++)
        candidate[by_pos[i]] = 1;
    const int radius = std::max(0, kernel / 2);
    std::vector<float> pooled((size_t) L * G * n), cell_scores((size_t) L * n, 0.0f);
    std::vector<double> entropy(L, 0.0);
    for (int l = 0; l < L; l++) {
        for (int g = 0; g < G; g++) {
            const size_t row = ((size_t) l * G + g) * n;
            for (int i = 0; i < n; i++) {
                float best = -INFINITY;
                for (int k = std::max(0, i - radius); k <= std::min(n - 1, i + radius); k++)
                    best = std::max(best, scores[row + by_pos[k]]);
                pooled[row + by_pos[i]] = best;
            }
            for (int j = 0; j < n; j++)
                cell_scores[(size_t) l * n + j] = std::max(cell_scores[(size_t) l * n + j], pooled[row + j]);
        }
        double total = 0;
        int count = 0;
        for (int g = 0; g < G; g++)
            for (int j = 0; j < n; j++)
                if (candidate[j]) {
                    total += pooled[((size_t) l * G + g) * n + j];
                    count++;
                }
        if (total > 0 && count > 0) {
            double e = 0;
            for (int g = 0; g < G; g++)
                for (int j = 0; j < n; j++) {
                    const double p = candidate[j] ? pooled[((size_t) l * G + g) * n + j] / total : 0;
                    if (p > 0)
                        e -= p * std::log(p);
                }
            entropy[l] = e / count;
        }
    }
    const double sum = std::accumulate(entropy.begin(), entropy.end(), 0.0);
    std::vector<float> out(n, 0.0f);
    for (int l = 0; l < L; l++) {
        const double share = sum > 0 ? entropy[l] / sum : 1.0 / L;
        double total = 0;
        for (int j = 0; j < n; j++)
            total += cell_scores[(size_t) l * n + j];
        if (!(total > 0))
            continue;
        for (int j = 0; j < n; j++)
            out[j] = (float) ((double) out[j] + share * cell_scores[(size_t) l * n + j] / total);
    }
    return out;
}

inline selection select_cells(const std::string & policy, const snapshot & s, const round_target & target, policy_state & state,
        std::vector<double> * retention_priority) {
    const int n = s.n();
    const std::vector<int> by_pos = order_by_position(s.pos);
    selection sel;
    int structural = 0;
    if (policy == "streamingllm") {
        // streamingLlm.ts: 4 sinks, then the newest
        sel.order = structured_order<float>(by_pos, std::min(4, target.max_keep), n, nullptr, structural);
        sel.quota = target.max_keep;
    } else if (policy == "h2o") {
        // h2o.ts: heavy hitters (half the budget) and the recent window
        const std::vector<float> agg = aggregate_normalised(s.accumulated, s.layers, s.heads, n, 0);
        const int recent = std::max(1, target.max_keep - (int) std::floor(target.max_keep * 0.5));
        sel.order = structured_order(by_pos, 0, recent, agg.data(), structural);
        sel.quota = std::min(n, target.max_keep);
    } else if (policy == "lethe") {
        // lethe.ts: Algorithm 1's segmented shrinking on the RASR scores, L_evict carried between rounds
        const std::vector<float> agg = aggregate_normalised(s.accumulated, s.layers, s.heads, n, 0);
        double threshold = state.lethe_threshold >= 0 ? state.lethe_threshold : std::max(1.0, std::floor(target.max_keep * 0.5));
        const int recent = (int) std::floor(0.3 * n);
        sel.order = structured_order(by_pos, 4, recent, agg.data(), structural);
        sel.quota = n;
        if (n > threshold) {
            const std::vector<int> top = rank_descending(agg.data(), n);
            const float head = agg[top[0]];
            int breakpoint = -1;
            if (head > 0) {
                for (int d = 1; d < 8; d++) {
                    const int c = (int) std::floor((double) n * d / 8);
                    const float cut = agg[top[c]];
                    if (cut <= 0 || head / cut > 400) {
                        breakpoint = c;
                        break;
                    }
                }
            }
            if (breakpoint >= 0) {
                std::vector<uint8_t> in_structure(n, 0);
                for (int i = 0; i < structural; i++)
                    in_structure[sel.order[i]] = 1;
                int outside = 0;
                for (int i = 0; i < breakpoint; i++)
                    outside += in_structure[top[i]] ? 0 : 1;
                sel.quota = structural + outside;
                threshold = std::max(threshold, (double) (breakpoint + recent));
            } else {
                threshold = 2 * threshold;
            }
            threshold = std::min(threshold, (double) target.max_keep);
        }
        state.lethe_threshold = threshold;
        sel.protect = protected_input(s.pos, target, 0.5);
    } else if (policy == "refreekv") {
        // refreekv.ts: first m = 4 then newest first; the 1% norm test once, right after the prompt
        sel.first_layer = s.layers > 2 ? 2 : 0;
        const int m = std::min(4, n);
        sel.order.assign(by_pos.begin(), by_pos.begin() + m);
        for (int i = n - 1; i >= m; i--)
            sel.order.push_back(by_pos[i]);
        sel.quota = n;
        if (std::strcmp(target.phase, "after-prefill") == 0) {
            const std::vector<float> last = aggregate_normalised(s.last, s.layers, s.heads, n, sel.first_layer);
            double total = 0;
            for (int j : sel.order)
                total += (double) last[j] * last[j];
            if (total > 0) {
                const double norm = std::sqrt(total);
                double cumulative = 0;
                for (int i = 0; i < n; i++) {
                    cumulative += (double) last[sel.order[i]] * last[sel.order[i]];
                    if (1 - std::sqrt(cumulative) / norm < 0.01) {
                        sel.quota = i + 1;
                        break;
                    }
                }
            }
        }
    } else if (policy == "leankv") {
        // leankv.ts: mean attention since written (max over layers and heads) against alpha = 1.2 times the average; W = 64
        const std::vector<float> best = max_over_rows(s.accumulated, s.layers, s.heads, n, 0.0f);
        int64_t newest = -1;
        for (int32_t p : s.pos)
            newest = std::max<int64_t>(newest, p);
        const double length = (double) (newest + 1);
        const bool prompt = std::strcmp(target.phase, "decode") != 0;
        std::vector<double> relative(n);
        for (int j = 0; j < n; j++)
            relative[j] = best[j] / std::max(1.0, length - s.pos[j]) * (prompt ? s.pos[j] + 1 : length);
        sel.order = structured_order(by_pos, 0, 64, relative.data(), structural);
        sel.quota = structural;
        for (int r = structural; r < n; r++)
            sel.quota += relative[sel.order[r]] >= 1.2 ? 1 : 0;
    } else if (policy == "lava") {
        // lava.ts, aggregate mode: w = 32, kernel 7
        const std::vector<float> agg = lava_aggregate(s, 32, 7);
        sel.order = structured_order(by_pos, 0, 32, agg.data(), structural);
        sel.quota = std::min(n, target.max_keep);
    } else if (policy == "trimkv") {
        // trimkv.ts + decide.ts: (t - pos) * max log beta over layers and KV heads
        const std::vector<float> max_log_beta = max_over_rows(s.log_beta, s.layers, s.kv_heads, n, -INFINITY);
        *retention_priority = decayed_retention(max_log_beta, s.pos, retention_step(s.pos, target.tokens_seen));
        sel.order = rank_descending(retention_priority->data(), n);
        sel.quota = std::min(n, target.max_keep);
    } else {
        fail("no ranking for policy " + policy);
    }
    return sel;
}

// decide.ts in `aggregate` mode: position 0, the 8 newest and the policy's protected cells stay; the selection's first
// `quota` cells fill the budget in their order
inline std::vector<int32_t> decide(const std::string & policy, const snapshot & s, const round_target & target, policy_state & state) {
    const int n = s.n();
    std::vector<double> retention;
    const selection sel = select_cells(policy, s, target, state, &retention);
    const std::vector<int> by_pos = order_by_position(s.pos);
    std::vector<uint8_t> keep(n, 0);
    int kept = 0;
    auto protect = [&](int j) {
        if (!keep[j]) {
            keep[j] = 1;
            kept++;
        }
    };
    if (n > 0)
        protect(by_pos[0]);
    const int newest = std::max(1, std::min(8, target.max_keep - 1));
    for (int i = std::max(0, n - newest); i < n; i++)
        protect(by_pos[i]);
    std::vector<int> policy_protects = sel.protect;
    std::sort(policy_protects.begin(), policy_protects.end(), [&](int a, int b) { return s.pos[a] < s.pos[b]; });
    for (int j : policy_protects) {
        if (kept >= target.max_keep)
            break;
        protect(j);
    }
    const int quota = std::min(sel.quota, (int) sel.order.size());
    int room = std::max(0, target.max_keep - kept);
    for (int r = 0; r < quota && room > 0; r++) {
        if (!keep[sel.order[r]]) {
            keep[sel.order[r]] = 1;
            room--;
        }
    }
    std::vector<int32_t> evict;
    for (int j = 0; j < n; j++)
        if (!keep[j])
            evict.push_back(s.pos[j]);
    std::sort(evict.begin(), evict.end());
    return evict;
}

// ---- snapshot files: rounds as the harness records them (--record) and choose.cpp reads them ----
//
// One block per round, as text: the policy whose run read it, the round's target and sizes, then the arrays it read, in
// the snapshot's layout (cells in position order; floats with 9 significant digits, which give each float back):
//
//   round <policy> <phase> <max_keep> <input_end> <tokens_seen> <n> <layers> <heads> <kv_heads>
//   pos <n positions>
//   accumulated <layers * heads * n>       last <layers * heads * n>           (when the round read scores)
//   log_beta <layers * kv_heads * n>       value_norms <layers * kv_heads * n> (when it read the gates or value norms)
//   end

struct recorded_round {
    std::string policy;
    round_target target;
    snapshot s;
};

inline void write_round(FILE * out, const std::string & policy, const snapshot & s, const round_target & t) {
    std::fprintf(out, "round %s %s %d %d %lld %d %d %d %d\npos", policy.c_str(), t.phase, t.max_keep, t.input_end,
        (long long) t.tokens_seen, s.n(), s.layers, s.heads, s.kv_heads);
    for (int32_t p : s.pos)
        std::fprintf(out, " %d", (int) p);
    std::fputc('\n', out);
    auto floats = [&](const char * name, const std::vector<float> & values) {
        if (values.empty())
            return;
        std::fputs(name, out);
        for (float v : values)
            std::fprintf(out, " %.9g", v);
        std::fputc('\n', out);
    };
    floats("accumulated", s.accumulated);
    floats("last", s.last);
    floats("log_beta", s.log_beta);
    floats("value_norms", s.value_norms);
    std::fputs("end\n", out);
}

inline std::vector<recorded_round> read_rounds(std::istream & in) {
    std::vector<recorded_round> rounds;
    std::string word;
    while (in >> word) {
        if (word != "round")
            fail("a snapshot file's round starts with `round`, not " + word);
        recorded_round r;
        std::string phase;
        long long seen = 0;
        int n = 0;
        in >> r.policy >> phase >> r.target.max_keep >> r.target.input_end >> seen >> n >> r.s.layers >> r.s.heads >> r.s.kv_heads;
        if (!in || n < 0)
            fail("a snapshot file's round line is incomplete");
        r.target.tokens_seen = seen;
        // round_target keeps its phase as one of these literals
        for (const char * known : {"after-prefill", "prefill-chunk", "decode"})
            if (phase == known)
                r.target.phase = known;
        if (phase != r.target.phase)
            fail("unknown phase " + phase);
        r.s.pos.resize(n);
        while (in >> word && word != "end") {
            if (word == "pos") {
                for (int32_t & p : r.s.pos)
                    in >> p;
                continue;
            }
            const bool per_head = word == "accumulated" || word == "last";
            std::vector<float> * to = word == "accumulated" ? &r.s.accumulated
                : word == "last"                            ? &r.s.last
                : word == "log_beta"                        ? &r.s.log_beta
                : word == "value_norms"                     ? &r.s.value_norms
                                                            : nullptr;
            if (to == nullptr)
                fail("unknown array " + word + " in a snapshot file");
            to->resize((size_t) r.s.layers * (per_head ? r.s.heads : r.s.kv_heads) * n);
            std::string value;
            for (float & v : *to) {
                in >> value; // strtof, unlike operator>>, reads inf and -inf
                v = std::strtof(value.c_str(), nullptr);
            }
        }
        if (!in)
            fail("a snapshot file's round has no `end`");
        rounds.push_back(r);
    }
    return rounds;
}

} // namespace ponder
