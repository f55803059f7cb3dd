#!/bin/sh
# A file whose name alone is wrong.
