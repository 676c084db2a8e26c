"""The course machinery: running, checking and publishing the lessons.

`exercises` (the answer checkers, one module per lesson), `mistakes`
(`expect_error` for the classic-mistake cells), `runner` (lessons executed
unattended), `bench` (the lesson benchmark), `render` (the rendered course and
the slide decks), `doctor` (is this machine ready?). Its extra dependencies
(nbformat, nbclient, nbconvert) are the package's `course` extra. The teaching
library never imports it.
"""
