module github.com/memoryd/memoryd/clients/go

go 1.23
