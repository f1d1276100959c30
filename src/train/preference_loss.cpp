#include "train/preference_loss.h"

#include <cmath>

#include "core/error.h"

namespace mt {

namespace {

// log(sigmoid(x)) without overflow either way.
double log_sigmoid(double x) { return x >= 0.0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
double sigmoid(double x) { return x >= 0.0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

// The smoothed sigmoid loss of z and its derivative in z.
struct Smoothed {
  double loss, dz;
};
Smoothed smoothed_sigmoid(double z, double ls) {
  return {-(1.0 - ls) * log_sigmoid(z) - ls * log_sigmoid(-z), -(1.0 - ls) * sigmoid(-z) + ls * sigmoid(z)};
}

// log(1 - e^a) for a < 0 (a mean log-probability), and its derivative -e^a / (1 - e^a).
double log1m_exp(double a) { return std::log(-std::expm1(a)); }
double dlog1m_exp(double a) { return -std::exp(a) / -std::expm1(a); }

}  // namespace

PreferenceLoss parse_preference_loss(std::string_view name) {
  if (name == "sigmoid" || name == "dpo") return PreferenceLoss::kSigmoid;
  if (name == "ipo") return PreferenceLoss::kIpo;
  if (name == "simpo") return PreferenceLoss::kSimpo;
  if (name == "orpo") return PreferenceLoss::kOrpo;
  fail("unknown preference loss \"" + std::string(name) + "\"; choose sigmoid (DPO), ipo, simpo or orpo");
}

std::string_view preference_loss_name(PreferenceLoss loss) {
  switch (loss) {
    case PreferenceLoss::kSigmoid: return "sigmoid";
    case PreferenceLoss::kIpo: return "ipo";
    case PreferenceLoss::kSimpo: return "simpo";
    case PreferenceLoss::kOrpo: return "orpo";
  }
  return "?";
}

bool needs_reference(PreferenceLoss loss) { return loss == PreferenceLoss::kSigmoid || loss == PreferenceLoss::kIpo; }
bool length_normalised(PreferenceLoss loss) { return loss != PreferenceLoss::kSigmoid; }

PreferenceResult preference_loss(const PreferenceLossConfig& cfg, std::span<const CompletionLogp> policy,
                                 std::span<const CompletionLogp> reference) {
  MT_CHECK(policy.size() % 2 == 0 && !policy.empty(), "preference loss: pairs of sequences expected");
  const bool with_ref = needs_reference(cfg.loss);
  MT_CHECK(!with_ref || reference.size() == policy.size(), "preference loss: a reference for every sequence");
  const size_t P = policy.size() / 2;
  const bool mean = length_normalised(cfg.loss);
  const double beta = cfg.beta;
  // The log-probability the loss reads and its derivative in the sum.
  const auto logp = [&](const CompletionLogp& s) {
    if (s.tokens <= 0) fail("preference loss: a sequence without completion tokens");
    return mean ? s.sum / double(s.tokens) : s.sum;
  };
  const auto dlogp = [&](const CompletionLogp& s) { return mean ? 1.0 / double(s.tokens) : 1.0; };

  PreferenceResult out;
  out.dsum.assign(policy.size(), 0.0);
  PreferenceMetrics& m = out.metrics;
  m.pairs = int64_t(P);
  const double inv_p = 1.0 / double(P);
  // The chosen NLL (ORPO, and SimPO's CPO term): the mean loss of the step's chosen tokens.
  const double nll_weight = cfg.loss == PreferenceLoss::kOrpo ? 1.0 : cfg.loss == PreferenceLoss::kSimpo ? cfg.cpo_alpha : 0.0;
  int64_t chosen_tokens = 0;
  double chosen_sum = 0.0;
  for (size_t p = 0; p < P; ++p) chosen_tokens += policy[2 * p].tokens, chosen_sum += policy[2 * p].sum;

  for (size_t p = 0; p < P; ++p) {
    const CompletionLogp &c = policy[2 * p], &r = policy[2 * p + 1];
    const double pc = logp(c), pr = logp(r);
    const double rc = with_ref ? logp(reference[2 * p]) : 0.0, rr = with_ref ? logp(reference[2 * p + 1]) : 0.0;
    double loss = 0.0, dpc = 0.0, dpr = 0.0;  // this pair's, and its derivatives in pc and pr
    switch (cfg.loss) {
      case PreferenceLoss::kSigmoid: {
        const Smoothed s = smoothed_sigmoid(beta * ((pc - pr) - (rc - rr)), cfg.label_smoothing);
        loss = s.loss, dpc = s.dz * beta, dpr = -s.dz * beta;
        break;
      }
      case PreferenceLoss::kIpo: {
        const double h = (pc - pr) - (rc - rr) - 1.0 / (2.0 * beta);
        loss = h * h, dpc = 2.0 * h, dpr = -2.0 * h;
        break;
      }
      case PreferenceLoss::kSimpo: {
        const Smoothed s = smoothed_sigmoid(beta * (pc - pr) - cfg.simpo_gamma, cfg.label_smoothing);
        loss = s.loss, dpc = s.dz * beta, dpr = -s.dz * beta;
        break;
      }
      case PreferenceLoss::kOrpo: {
        if (!(pc < 0.0 && pr < 0.0)) fail("orpo: a completion's mean log-probability is 0 (its odds are infinite)");
        const double o = (pc - pr) - (log1m_exp(pc) - log1m_exp(pr));
        const double dl_do = -beta * sigmoid(-o);  // d(-beta logsig(o)) / do
        loss = -beta * log_sigmoid(o);
        dpc = dl_do * (1.0 - dlog1m_exp(pc)), dpr = dl_do * (-1.0 + dlog1m_exp(pr));
        break;
      }
    }
    out.loss += loss * inv_p;
    out.dsum[2 * p] = dpc * dlogp(c) * inv_p;
    out.dsum[2 * p + 1] = dpr * dlogp(r) * inv_p;
    const double reward_c = beta * (pc - rc), reward_r = beta * (pr - rr);
    m.rewards_chosen += reward_c * inv_p, m.rewards_rejected += reward_r * inv_p;
    m.accuracy += (reward_c > reward_r ? 1.0 : 0.0) * inv_p;
    m.margin += (reward_c - reward_r) * inv_p;
    m.logps_chosen += pc * inv_p, m.logps_rejected += pr * inv_p;
  }
  if (chosen_tokens > 0) m.nll = -chosen_sum / double(chosen_tokens);
  if (nll_weight != 0.0) {
    out.loss += nll_weight * m.nll;
    for (size_t p = 0; p < P; ++p) out.dsum[2 * p] += -nll_weight / double(chosen_tokens);
  }
  return out;
}

}  // namespace mt
