#include "fp8_check.h"

#include <fmt/format.h>

namespace flashlab::lab::fp8_check {

std::string verdict(const RowResult& r, bool zh) {
  if (!r.finite)
    return zh ? fmt::format("FAIL {}（{}）：O 或 LSE 含 NaN 或 Inf。错的结果的误差和速度都不算数。",
                            r.version, r.where)
              : fmt::format(
                    "FAIL {} ({}): O or LSE holds NaN or Inf. A wrong answer's error and "
                    "speed do not count.",
                    r.version, r.where);
  std::string over;
  if (!(r.o_rel <= r.o_budget))
    over = fmt::format("O rel error {:.2e} > budget {:.2e}", r.o_rel, r.o_budget);
  if (!(r.lse_rel <= r.lse_budget))
    over += fmt::format("{}LSE rel error {:.2e} > budget {:.2e}", over.empty() ? "" : "; ",
                        r.lse_rel, r.lse_budget);
  if (over.empty()) return {};
  return zh ? fmt::format("FAIL {}（{}）：{}。错的结果的误差和速度都不算数。", r.version, r.where,
                          over)
            : fmt::format("FAIL {} ({}): {}. A wrong answer's error and speed do not count.",
                          r.version, r.where, over);
}

}  // namespace flashlab::lab::fp8_check
