// Pipeline schedules against the published formulas for their makespan,
// bubble and activation memory (Narayanan et al. 2021 for 1F1B and the
// interleaved schedule, Qi et al. 2023 for ZB-H1), and the checks that
// refuse a broken schedule.
#include "megc/Pipeline/Schedule.h"

#include "llvm/Support/raw_ostream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace megc::pipeline;
using ::testing::HasSubstr;

namespace {

Schedule build(ScheduleKind kind, int ranks, int chunks, int microBatches,
               const PassCosts &costs = {}) {
  auto schedule = buildSchedule(kind, ranks, chunks, microBatches, costs);
  EXPECT_TRUE(static_cast<bool>(schedule))
      << llvm::toString(schedule.takeError());
  return std::move(*schedule);
}

Timeline simulate(const Schedule &schedule, const PassCosts &costs = {}) {
  auto timeline = simulateSchedule(schedule, costs);
  EXPECT_TRUE(static_cast<bool>(timeline))
      << llvm::toString(timeline.takeError());
  return std::move(*timeline);
}

std::string failure(const Schedule &schedule) {
  auto timeline = simulateSchedule(schedule);
  if (timeline)
    return "accepted";
  return llvm::toString(timeline.takeError());
}

TEST(PipelineSchedule, OneFOneBMatchesItsFormula) {
  // F = 1, B = 1, W = 1: (m + p - 1) (F + B + W), and rank r holds the
  // activations of min(p - r, m) micro-batches.
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 3, 8, 16}) {
      Schedule schedule = build(ScheduleKind::OneFOneB, p, 1, m);
      Timeline timeline = simulate(schedule);
      EXPECT_DOUBLE_EQ(timeline.makespan, (m + p - 1) * 3.0)
          << "p " << p << " m " << m;
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(timeline.peakInFlight[r], std::min(p - r, m));
      EXPECT_NEAR(timeline.bubbleFraction(),
                  (p - 1) * 3.0 / ((m + p - 1) * 3.0), 1e-12);
    }
}

TEST(PipelineSchedule, InterleavedShrinksTheBubbleByTheChunks) {
  // Each chunk costs 1/v of a stage: the bubble is (p - 1)(F + B + W) / v.
  for (int p : {2, 4})
    for (int v : {2, 3})
      for (int m : {p, 2 * p, 4 * p}) {
        PassCosts chunk{1.0 / v, 1.0 / v, 1.0 / v, 0};
        Schedule schedule = build(ScheduleKind::Interleaved, p, v, m, chunk);
        Timeline timeline = simulate(schedule, chunk);
        EXPECT_NEAR(timeline.makespan, m * 3.0 + (p - 1) * 3.0 / v, 1e-9)
            << "p " << p << " v " << v << " m " << m;
      }
}

TEST(PipelineSchedule, ZeroBubbleH1FillsTheBubbleWithWeightPasses) {
  // ZB-H1's bubble is (p - 1)(F + B - W) against 1F1B's (p - 1)(F + B + W).
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 3 * p}) {
      Schedule schedule = build(ScheduleKind::ZeroBubbleH1, p, 1, m);
      Timeline timeline = simulate(schedule);
      EXPECT_NEAR(timeline.makespan, m * 3.0 + (p - 1) * 1.0, 1e-9)
          << "p " << p << " m " << m;
      // Its activation memory is 1F1B's: no rank holds more micro-batches
      // (from F to W) than 1F1B's first stage, p.
      for (int r = 0; r < p; ++r)
        EXPECT_LE(timeline.peakInFlight[r], p)
            << "p " << p << " m " << m << " rank " << r;
    }
  // With a slow transfer the order still holds up: never worse than 1F1B.
  PassCosts slow{1, 1, 1, 0.5};
  Schedule zb = build(ScheduleKind::ZeroBubbleH1, 4, 1, 8, slow);
  Schedule plain = build(ScheduleKind::OneFOneB, 4, 1, 8);
  EXPECT_LT(simulate(zb, slow).makespan, simulate(plain, slow).makespan);
}

TEST(PipelineSchedule, PrintsEachRanksActions) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printSchedule(build(ScheduleKind::OneFOneB, 2, 1, 2), os);
  EXPECT_EQ(text,
            "pipeline schedule 1f1b: 2 ranks, 1 stage(s) per rank, 2 "
            "micro-batches\n"
            "rank 0: F0.0 send-act0.0 F1.0 send-act1.0 recv-grad0.0 BW0.0 "
            "recv-grad1.0 BW1.0 optimizer\n"
            "rank 1: recv-act0.1 F0.1 BW0.1 send-grad0.1 recv-act1.1 F1.1 "
            "BW1.1 send-grad1.1 optimizer\n");
}

TEST(PipelineSchedule, WritesAChromeTrace) {
  Schedule schedule = build(ScheduleKind::ZeroBubbleH1, 2, 1, 2);
  std::string text;
  llvm::raw_string_ostream os(text);
  writeScheduleTrace(schedule, simulate(schedule), os);
  EXPECT_THAT(text, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(text, HasSubstr("\"name\": \"W0.1\""));
}

TEST(PipelineSchedule, RefusesSettingsThatDoNotFit) {
  auto error = [](llvm::Expected<Schedule> schedule) {
    return schedule ? std::string("built")
                    : llvm::toString(schedule.takeError());
  };
  EXPECT_THAT(error(buildSchedule(ScheduleKind::Interleaved, 4, 2, 6)),
              HasSubstr("micro-batches in multiples of the pipeline ranks: "
                        "6 micro-batches on 4 ranks"));
  EXPECT_THAT(error(buildSchedule(ScheduleKind::Interleaved, 4, 1, 8)),
              HasSubstr("at least 2 virtual stages"));
  EXPECT_THAT(error(buildSchedule(ScheduleKind::OneFOneB, 4, 2, 8)),
              HasSubstr("need --pp-schedule interleaved"));
  EXPECT_THAT(error(buildSchedule(ScheduleKind::OneFOneB, 4, 1, 0)),
              HasSubstr("0 micro-batches"));
  EXPECT_EQ(parseScheduleKind("zb-h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_EQ(parseScheduleKind("gpipe"), std::nullopt);
}

TEST(PipelineSchedule, RefusesBrokenSchedules) {
  Schedule good = build(ScheduleKind::OneFOneB, 2, 1, 2);
  ASSERT_EQ(failure(good), "accepted");

  // A pass before what it needs on its own rank.
  Schedule early = good;
  std::swap(early.actions[1][0], early.actions[1][1]);
  EXPECT_THAT(failure(early),
              HasSubstr("rank 1 runs F0.1 before recv-act0.1, which it "
                        "needs"));

  // A transfer left out.
  Schedule lost = good;
  lost.actions[0].erase(lost.actions[0].begin() + 1);
  EXPECT_THAT(failure(lost), HasSubstr("the transfers of micro-batch 0 of "
                                       "stage 0 do not match"));

  // A receive posted before the pass whose result its sender waits for:
  // every rank waits.
  Schedule cycle = good;
  auto &rank0 = cycle.actions[0];
  auto recv =
      std::find(rank0.begin(), rank0.end(), Action{Pass::RecvGradient, 0, 0});
  Action moved = *recv;
  rank0.erase(recv);
  rank0.insert(rank0.begin(), moved);
  EXPECT_THAT(failure(cycle),
              HasSubstr("every rank waits on a receive that no rank will "
                        "send (rank 0 at recv-grad0.0, rank 1 at "
                        "recv-act0.1)"));

  // A pass on the wrong rank, and one run twice.
  Schedule wrong = good;
  wrong.actions[0].insert(wrong.actions[0].begin(),
                          Action{Pass::Forward, 1, 1});
  EXPECT_THAT(failure(wrong), HasSubstr("rank 0 runs F1.1, a pass of stage 1, "
                                        "which is rank 1's"));
  Schedule twice = good;
  twice.actions[0].insert(twice.actions[0].begin(),
                          Action{Pass::Forward, 0, 0});
  EXPECT_THAT(failure(twice), HasSubstr("rank 0 runs F0.0 twice"));
}

} // namespace
