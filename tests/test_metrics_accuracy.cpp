// Accuracy and the confusion matrix (metrics/accuracy.h, metrics/f1.h): values by hand, the
// conventions for nothing counted and for absent classes, merging, bad input.
#include "metrics/accuracy.h"
#include "metrics/f1.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::metrics;
using namespace tapestry::testing;

TEST_CASE("metrics: Accuracy counts hits over all or masked positions") {
  const std::vector<int64_t> predictions = {1, 2, 3, 4, 5}, targets = {1, 0, 3, 0, 5};
  Accuracy all, masked;
  all.add(predictions, targets);  // hits at 0, 2, 4 → 3/5
  CHECK(all.hits() == 3);
  CHECK(all.total() == 5);
  CHECK(all.value() == 0.6);
  masked.add(predictions, targets, {true, true, false, true, false});  // positions 0, 1, 3: one hit
  CHECK(masked.hits() == 1);
  CHECK(masked.total() == 3);
  CHECK(masked.value() == doctest::Approx(1.0 / 3));

  // merge adds counts: 3/5 + 1/3 = 4/8, not the mean of the two values.
  all.merge(masked);
  CHECK(all.value() == 0.5);
}

TEST_CASE("metrics: Accuracy with nothing counted is 0") {
  Accuracy a;
  CHECK(a.value() == 0.0);
  a.add({1, 2}, {1, 2}, {false, false});  // a mask that selects nothing counts nothing
  CHECK(a.total() == 0);
  CHECK(a.value() == 0.0);
  a.add({}, {});
  CHECK(a.total() == 0);
}

TEST_CASE("metrics: Accuracy bad input") {
  Accuracy a;
  check_error([&] { a.add({1, 2}, {1}); }, {"Accuracy::add", "2 predictions", "1 targets"});
  check_error([&] { a.add({1, 2}, {1, 2}, {true}); }, {"Accuracy::add", "1 mask entries"});
  CHECK(a.total() == 0);
}

TEST_CASE("metrics: ConfusionMatrix precision, recall, F1 by hand") {
  // K = 3. targets/predictions:
  //   t: 0 0 0 1 1 2
  //   p: 0 0 1 1 2 2
  // n(t, p): n(0,0) = 2, n(0,1) = 1, n(1,1) = 1, n(1,2) = 1, n(2,2) = 1.
  // class 0: TP 2, FP 0, FN 1 → P = 1,   R = 2/3, F1 = 4/5
  // class 1: TP 1, FP 1, FN 1 → P = 1/2, R = 1/2, F1 = 2/4 = 1/2
  // class 2: TP 1, FP 1, FN 0 → P = 1/2, R = 1,   F1 = 2/3
  // macro-F1 = (4/5 + 1/2 + 2/3)/3 = 59/90; accuracy = 4/6.
  ConfusionMatrix cm(3);
  cm.add({0, 0, 1, 1, 2, 2}, {0, 0, 0, 1, 1, 2});
  CHECK(cm.count(0, 1) == 1);
  CHECK(cm.count(1, 0) == 0);
  CHECK(cm.support(0) == 3);
  CHECK(cm.predicted(2) == 2);
  CHECK(cm.precision(0) == 1.0);
  CHECK(cm.recall(0) == doctest::Approx(2.0 / 3));
  CHECK(cm.f1(0) == doctest::Approx(0.8));
  CHECK(cm.f1(1) == doctest::Approx(0.5));
  CHECK(cm.precision(2) == 0.5);
  CHECK(cm.recall(2) == 1.0);
  CHECK(cm.f1(2) == doctest::Approx(2.0 / 3));
  CHECK(cm.macro_f1() == doctest::Approx(59.0 / 90));
  CHECK(cm.accuracy() == doctest::Approx(4.0 / 6));
}

TEST_CASE("metrics: ConfusionMatrix classes without support or predictions") {
  // K = 4; class 3 never occurs, class 2 is predicted but never a target, class 1 is a target but
  // never predicted.
  //   t: 0 0 1
  //   p: 0 2 0
  // class 0: TP 1, FP 1, FN 1 → F1 = 2/4 = 1/2
  // class 1: TP 0 → P = 0 (never predicted: zero_division = 0), R = 0, F1 = 0
  // class 2: TP 0 → P = 0, R = 0 (no support: zero_division = 0), F1 = 0
  // class 3: no support and no predictions → F1 = 0, and left out of the mean:
  // macro-F1 = (1/2 + 0 + 0)/3 = 1/6 (counting class 3 would give 1/8).
  ConfusionMatrix cm(4);
  cm.add(0, 0);
  cm.add(2, 0);
  cm.add(0, 1);
  CHECK(cm.precision(1) == 0.0);
  CHECK(cm.recall(2) == 0.0);
  CHECK(cm.f1(3) == 0.0);
  CHECK(cm.macro_f1() == doctest::Approx(1.0 / 6));
  CHECK(cm.accuracy() == doctest::Approx(1.0 / 3));

  ConfusionMatrix empty(2);
  CHECK(empty.macro_f1() == 0.0);
  CHECK(empty.accuracy() == 0.0);
}

TEST_CASE("metrics: ConfusionMatrix merge") {
  ConfusionMatrix a(2), b(2);
  a.add(1, 1);
  b.add(0, 1);
  a.merge(b);  // class 1: TP 1, FN 1 → R = 1/2
  CHECK(a.total() == 2);
  CHECK(a.recall(1) == 0.5);
  check_error([&] { a.merge(ConfusionMatrix(3)); }, {"ConfusionMatrix::merge", "3 classes", "one of 2"});
}

TEST_CASE("metrics: ConfusionMatrix bad input") {
  check_error([] { ConfusionMatrix(0); }, {"ConfusionMatrix", "got 0"});
  check_error([] { ConfusionMatrix(ConfusionMatrix::kMaxClasses + 1); }, {"ConfusionMatrix", "K²"});
  ConfusionMatrix cm(3);
  check_error([&] { cm.add(-1, 0); }, {"ConfusionMatrix::add", "prediction -1", "3 classes"});
  check_error([&] { cm.add(0, 3); }, {"ConfusionMatrix::add", "target 3", "0..2"});
  check_error([&] { cm.add({0, 1}, {0}); }, {"ConfusionMatrix::add", "2 predictions", "1 targets"});
  // A bad entry anywhere leaves the matrix unchanged.
  check_error([&] { cm.add({0, 1, 7}, {0, 1, 2}); }, {"ConfusionMatrix::add", "prediction 7"});
  CHECK(cm.total() == 0);
  check_error([&] { cm.f1(5); }, {"ConfusionMatrix::f1", "class 5"});
  check_error([&] { cm.precision(-2); }, {"ConfusionMatrix::precision", "class -2"});
  check_error([&] { cm.count(0, 3); }, {"ConfusionMatrix::count", "prediction 3"});
}
