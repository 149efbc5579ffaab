# The tests that take more than about 20 s each on 2 cores (the seconds of
# tests/ctest-costs.txt). Each gets the label `slow` beside its folder's, so
#   ctest -LE slow    runs the fast suite, and
#   ctest -L slow     only these.
# ctest runs this file after each test binary's discovery script (CMakeLists.txt
# names it in TEST_INCLUDE_FILES), when the discovered names are known: a list
# test_<folder>_TESTS per test binary. Names are matched without the
# "  # GetParam() = ..." that GoogleTest appends to parameterized tests.
set(EQ_SLOW_TESTS
  BatchMlp.TrellisIntegerPathMatchesFloat64
  BitBudget.OnQwen3MoeSmall
  Corpus/BitsPerByteTest.MatchesReference/qwen3moe_small_eval_python_txt
  Corpus/BitsPerByteTest.MatchesReference/tinymoe_calib_mixed_txt
  DecodeMlp.StrategiesAgreeAndDecodeIsCloseToBatch
  DeviceGemv.ExpertShapesMatchCpuMatmul
  PackCli.TrellisLutPacksVerifiesAndScoresLikeOneMad
  PassOrder.DeepseekV3SmallProfileIdentical
  PassOrder.Qwen3MoeSmallProfileIdentical
  PassOrder.Qwen3NextSmallProfileIdentical
  ReferenceCounts.DeepseekV3SmallCalibMixed
  ReferenceCounts.Glm4MoeSmallCalibMixed
  ReferenceCounts.GptOssSmallCalibMixed
  ReferenceCounts.GptOssSmallMxfp4CalibMixed
  ReferenceCounts.Qwen35MoeSmallCalibMixed
  ReferenceCounts.Qwen3NextSmallCalibMixed
  ReferenceCounts.TinyMoeCalibMixed
  Standalone.SourceCheckpointIsGone
)

# The sanitized twins' tests (CMakeLists.txt, EQ_SANITIZER_TESTS) have the same
# names behind the prefix "<variant>:", and every one of them gets the label
# `<variant>` here.
# Also `slow` on the sanitized twins only (CMakeLists.txt, EQ_SANITIZER_TESTS):
# the tests of more than about 25 s under ASan+UBSan on 2 cores, each a whole
# profile, pack or eval through the command line or a whole corpus file, whose
# code the faster tests of the same folder run under the sanitizers too. The
# plain ctest runs them.
set(EQ_SLOW_SANITIZED_TESTS
  Corpus/BitsPerByteTest.MatchesReference/tinymoe_eval_python_txt
  DefaultBudgetCli.NoBudgetOptionAllocatesThePolicyDefaultAndThresholdsOptsOut
  EvalCli.GenerateRunsThePackedFolderAlone
  EvalCli.PackedAloneReportsItsOwnBitsAndSkipsTheComparison
  ExpertShape.EveryPathMatchesFloat64WithBiasesAndClampedSwiGlu
  PackCli.LayerPartsMergeToTheSinglePack
  Profile.MergeOfHalvesEqualsWhole
  ProfileOutputFaults.FailedRenameRollsBackEveryReplacedFile
  ProgressCli.EvalQualityWindowOrderEndsAt100PercentOfTheTokens
  ProxyFitCli.SummaryAndJsonShowEachFitAndADamagedRecordIsRefused
)

foreach(folder IN LISTS EQ_TEST_FOLDERS)
  foreach(variant "" ${EQ_TEST_VARIANTS})
    if(variant)
      set(tests "${test_${folder}_${variant}_TESTS}")
      set(labels "${folder};${variant}")
      string(LENGTH "${variant}:" prefix_length)
    else()
      set(tests "${test_${folder}_TESTS}")
      set(labels "${folder}")
      set(prefix_length 0)
    endif()
    foreach(test IN LISTS tests)
      string(SUBSTRING "${test}" ${prefix_length} -1 name)
      string(FIND "${name}" "  #" param_comment)
      string(SUBSTRING "${name}" 0 ${param_comment} name)
      list(FIND EQ_SLOW_TESTS "${name}" slow_index)
      if(variant AND slow_index EQUAL -1)
        list(FIND EQ_SLOW_SANITIZED_TESTS "${name}" slow_index)
      endif()
      if(slow_index GREATER -1)
        set_tests_properties("${test}" PROPERTIES LABELS "${labels};slow")
      elseif(variant)
        set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
      endif()
    endforeach()
  endforeach()
endforeach()
