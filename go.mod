module github.com/edgellmd/edgellmd

go 1.26
