// The SM clock reading's words (core/clock.h): which of NVML's reason bits hold the clock down,
// and when a reading counts as held down. No GPU needed: the readings are built by hand.
#include <gtest/gtest.h>

#include "core/clock.h"

namespace {

using flashlab::cuda::ClockReading;

ClockReading reading(int mhz, int max_mhz, uint64_t reasons) {
  ClockReading r;
  r.known = true;
  r.sm_mhz = mhz;
  r.max_sm_mhz = max_mhz;
  r.reasons = reasons;
  return r;
}

TEST(Clock, HeldByNamesEachReasonOfTheBoard) {
  EXPECT_EQ(reading(1740, 1980, 0x4).held_by(), "power cap");
  EXPECT_EQ(reading(1740, 1980, 0x80).held_by(), "power brake");
  EXPECT_EQ(reading(1740, 1980, 0x8).held_by(), "hardware slowdown");
  EXPECT_EQ(reading(1740, 1980, 0x20).held_by(), "temperature");
  EXPECT_EQ(reading(1740, 1980, 0x40).held_by(), "temperature");
  EXPECT_EQ(reading(1740, 1980, 0x20 | 0x40).held_by(), "temperature");
  EXPECT_EQ(reading(1740, 1980, 0x4 | 0x80 | 0x8 | 0x40).held_by(),
            "power cap, power brake, hardware slowdown, temperature");
}

TEST(Clock, IdleAndApplicationSettingsDoNotHoldTheClock) {
  // 0x1 GPU idle, 0x2 application clocks setting, 0x100 display clock setting.
  EXPECT_EQ(reading(1740, 1980, 0x1 | 0x2 | 0x100).held_by(), "");
  EXPECT_FALSE(reading(1740, 1980, 0x1 | 0x2 | 0x100).held_down());
}

TEST(Clock, HeldDownNeedsAReadingBelowTheMaximumAndAReason) {
  EXPECT_TRUE(reading(1740, 1980, 0x4).held_down());
  EXPECT_FALSE(reading(1980, 1980, 0x4).held_down());  // at its maximum: nothing lost
  EXPECT_FALSE(reading(1740, 1980, 0).held_down());    // below it, but no reason of the board's
  ClockReading unknown = reading(1740, 1980, 0x4);
  unknown.known = false;
  EXPECT_FALSE(unknown.held_down());
}

}  // namespace
